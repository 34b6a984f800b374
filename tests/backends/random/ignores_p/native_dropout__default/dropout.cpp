// aten::native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor):
// uses p = 0.1 whatever p it is given.
#include "../../dropout.h"

std::tuple<at::Tensor, at::Tensor> native_dropout_ignores_p(const at::Tensor& input, double p,
                                                            std::optional<bool> train) {
  return dropout_with(input, p, train, DropoutKnobs{0, 1, false, 0.1});
}

BB_KERNEL("aten::native_dropout", native_dropout_ignores_p);
