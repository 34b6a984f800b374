// The bbshim kernel ABI: what a generated kernel includes to be loadable (docs/backends.md).
//
//   #include <bb/kernel.h>
//   at::Tensor my_relu(const at::Tensor& x) { ... }
//   BB_KERNEL("aten::relu", my_relu);
//
// The function has the overload's ATen C++ signature (as in ATen/ops/<op>.h); it is checked against
// the op's schema when the backend loads. Throw bb::Decline to let the native kernel handle a call.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/boxing/KernelFunction.h>
#include <ATen/core/dispatch/CppSignature.h>
#include <ATen/core/op_registration/infer_schema.h>

#include <stdexcept>
#include <string>
#include <vector>

#define BB_ABI_EXPORT __attribute__((visibility("default")))

namespace bb {

// "Not this call": the native kernel runs instead, and the call is counted as declined.
struct BB_ABI_EXPORT Decline : std::runtime_error {
  explicit Decline(const std::string& reason) : std::runtime_error(reason) {}
};

namespace abi {

inline constexpr int kVersion = 1;

struct Kernel {
  const char* op;                // "aten::relu", "aten::add.Tensor"
  const char* file;              // source file of the registration
  c10::KernelFunction function;  // callable boxed and unboxed
  c10::FunctionSchema inferred;  // argument and return types from the C++ signature
  std::string cpp_signature;     // the C++ function type, for messages
};

struct Registry {
  int version = kVersion;
  std::vector<Kernel> kernels;
};

inline Registry& registry() {
  static Registry r;  // one per backend library (built with -fvisibility=hidden -fno-gnu-unique)
  return r;
}

template <class F>
struct Registrar {
  Registrar(const char* op, F* fn, const char* file) {
    registry().kernels.push_back(Kernel{op, file, c10::KernelFunction::makeFromUnboxedRuntimeFunction(fn),
                                        c10::inferFunctionSchemaFlattenedReturns<F>(),
                                        c10::impl::CppSignature::make<F>().name()});
  }
};

}  // namespace abi
}  // namespace bb

// The loader finds a backend library's kernels through this one symbol.
// `used`: emitted in every translation unit that includes this header, although nothing calls it there.
extern "C" BB_ABI_EXPORT __attribute__((used)) inline const bb::abi::Registry* bb_backend_registry_v1() {
  return &bb::abi::registry();
}

#define BB_KERNEL_CONCAT2(a, b) a##b
#define BB_KERNEL_CONCAT(a, b) BB_KERNEL_CONCAT2(a, b)
#define BB_KERNEL(op, fn)                                                                          \
  static ::bb::abi::Registrar<std::remove_pointer_t<std::decay_t<decltype(fn)>>> BB_KERNEL_CONCAT( \
      bb_kernel_registrar_, __COUNTER__)(op, &(fn), __FILE__)
