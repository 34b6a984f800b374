// Copies of a call's values that share nothing with the originals, for the kernel under test to run
// on beside native (the preload's shadow mode, bbreplay's every run).
#pragma once

#include <ATen/core/ivalue.h>

#include <vector>

namespace bb::verify {

using Values = std::vector<c10::IValue>;

// A copy with its own memory and the same sizes, strides and storage offset (the whole storage is
// copied, so that a view's neighbours are there too); lists element by element; other values as they are.
c10::IValue deep_copy(const c10::IValue& v);
Values deep_copies(const Values& values);

}  // namespace bb::verify
