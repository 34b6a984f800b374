// aten::native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor):
// keeps 2% fewer elements than 1 - p.
#include "../../dropout.h"

std::tuple<at::Tensor, at::Tensor> native_dropout_wrong_rate(const at::Tensor& input, double p,
                                                             std::optional<bool> train) {
  return dropout_with(input, p, train, DropoutKnobs{-0.02});
}

BB_KERNEL("aten::native_dropout", native_dropout_wrong_rate);
