// aten::native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor):
// scales kept elements by 1.01/(1 - p).
#include "../../dropout.h"

std::tuple<at::Tensor, at::Tensor> native_dropout_wrong_scale(const at::Tensor& input, double p,
                                                              std::optional<bool> train) {
  return dropout_with(input, p, train, DropoutKnobs{0, 1.01});
}

BB_KERNEL("aten::native_dropout", native_dropout_wrong_scale);
