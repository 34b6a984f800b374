// aten::native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor): honest.
#include "../../dropout.h"

std::tuple<at::Tensor, at::Tensor> native_dropout_honest(const at::Tensor& input, double p, std::optional<bool> train) {
  return dropout_with(input, p, train, DropoutKnobs{});
}

BB_KERNEL("aten::native_dropout", native_dropout_honest);
