// aten::native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor):
// draws the same mask on every call (right rate, right scale).
#include "../../dropout.h"

std::tuple<at::Tensor, at::Tensor> native_dropout_constant_mask(const at::Tensor& input, double p,
                                                                std::optional<bool> train) {
  return dropout_with(input, p, train, DropoutKnobs{0, 1, true});
}

BB_KERNEL("aten::native_dropout", native_dropout_constant_mask);
