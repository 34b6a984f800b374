// The verify checks (policy/verify/) as functions of values and schemas: flags, deep copy, which
// arguments an op may write, inputs changed that it may not, aliasing, strides, identical values.
#include <ATen/ATen.h>
#include <dlfcn.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <set>

#include "catch.h"
#include "policy/verify/compare.h"
#include "policy/verify/flags.h"
#include "policy/verify/integrity.h"
#include "policy/verify/values.h"

using namespace bb::verify;

namespace {

const c10::FunctionSchema& schema_of(const char* name, const char* overload) {
  auto op = c10::Dispatcher::singleton().findSchema({name, overload});
  REQUIRE(op.has_value());
  return op->schema();
}

}  // namespace

TEST_CASE("every flag has one name, and the name gives the flag back") {
  std::set<std::string> names;
  for (Flag f : all_flags()) {
    const std::string name = flag_name(f);
    CHECK(names.insert(name).second);
    REQUIRE(flag_from_name(name).has_value());
    CHECK(*flag_from_name(name) == f);
  }
  CHECK(names.size() == 11);
  CHECK(std::string(flag_name(Flag::CachedResult)) == "cached-result");
  CHECK(std::string(flag_name(Flag::DispatcherOverride)) == "dispatcher-override");
  CHECK(std::string(flag_name(Flag::TimerTampering)) == "timer-tampering");
  CHECK_FALSE(flag_from_name("cached_result").has_value());
  CHECK(flag_names({Flag::NativeCall, Flag::Aliasing}, ", ") == "native-call, aliasing");
  CHECK(flag_names({}, ", ").empty());
}

TEST_CASE("a deep copy has memory of its own and the same sizes, strides and storage offset") {
  at::Tensor base = at::arange(12, at::kFloat);
  at::Tensor view = base.as_strided({2, 3}, {1, 2}, 3);  // neither contiguous nor at offset 0
  c10::IValue copy = deep_copy(view);
  const at::Tensor& t = copy.toTensor();
  CHECK(t.sizes() == view.sizes());
  CHECK(t.strides() == view.strides());
  CHECK(t.storage_offset() == 3);
  CHECK(t.storage().nbytes() == base.storage().nbytes());
  CHECK(t.equal(view));
  CHECK(t.data_ptr() != view.data_ptr());
  base.fill_(-1);
  CHECK(t.min().item<float>() >= 0);  // the original's change is not the copy's
  c10::List<at::Tensor> list({at::ones({2}), at::zeros({3})});
  const Values copies = deep_copies({c10::IValue(list), c10::IValue(7), c10::IValue()});
  REQUIRE(copies[0].isTensorList());
  CHECK(copies[0].toTensorVector()[1].equal(at::zeros({3})));
  CHECK(copies[0].toTensorVector()[0].data_ptr() != list.get(0).data_ptr());
  CHECK(copies[1].toInt() == 7);
  CHECK(copies[2].isNone());
}

TEST_CASE("the schema says which arguments an op may write and whether it is functional") {
  const auto& add_ = schema_of("aten::add_", "Tensor");
  CHECK(writable(add_.arguments()[0]));
  CHECK_FALSE(writable(add_.arguments()[1]));
  CHECK_FALSE(functional(add_));
  CHECK(functional(schema_of("aten::relu", "")));
  CHECK_FALSE(functional(schema_of("aten::transpose", "int")));  // a view: its result aliases self
}

TEST_CASE("inputs changed that the schema does not let the op write are found, allowed ones are not") {
  const auto& add_ = schema_of("aten::add_", "Tensor");
  at::Tensor self = at::ones({3}), other = at::ones({3});
  const Values before = deep_copies({self, other, c10::IValue(1.0)});
  self.add_(1);  // may be written
  CHECK(first_unwritable_change(add_, before, {self, other, c10::IValue(1.0)}).empty());
  other.mul_(2);  // may not
  const Values after{self, other, c10::IValue(1.0)};
  CHECK(unwritable_changes(add_, before, after) == std::vector<bool>{false, true, false});
  CHECK(first_unwritable_change(add_, before, after) == "other");
  CHECK(first_unwritable_change(add_, before, after, {false, true}).empty());  // native changes it too
}

TEST_CASE("identical: bitwise, NaN equals NaN, lists element by element") {
  at::Tensor a = at::tensor({1.0f, NAN});
  CHECK(identical(a, a.clone()));
  CHECK_FALSE(identical(a, at::tensor({1.0f, 2.0f})));
  CHECK(identical(c10::IValue(c10::List<at::Tensor>({a})), c10::IValue(c10::List<at::Tensor>({a.clone()}))));
  CHECK_FALSE(identical(c10::IValue(c10::List<at::Tensor>({a})), c10::IValue(c10::List<at::Tensor>({a, a}))));
}

TEST_CASE("all_equal: every pair equal (at::equal's sense) in one read, on the CPU and, where there is one, a GPU") {
  std::vector<c10::Device> devices = {c10::kCPU};
  // (torch's CUDA kernels are in libtorch_cuda, which nothing here links: loaded where this torch has it)
  if (::dlopen(BB_TORCH_LIB_DIR "/libtorch_cuda.so", RTLD_NOW | RTLD_GLOBAL) && at::hasCUDA())
    devices.emplace_back(c10::kCUDA, 0);
  for (const c10::Device d : devices) {
    INFO(d.str());
    const auto on = at::TensorOptions().device(d);
    std::vector<std::pair<at::Tensor, at::Tensor>> pairs;
    for (int k = 0; k < 40; ++k) {
      at::Tensor t = at::randn({k + 1, 3}, on);
      pairs.emplace_back(t, t.clone());
    }
    pairs.emplace_back(at::Tensor(), at::Tensor());             // undefined on both sides: equal
    pairs.emplace_back(at::empty({0}, on), at::empty({0}, on));  // empty: equal
    at::Tensor flags = at::arange(6, on).remainder(2).to(at::kBool);
    pairs.emplace_back(flags, flags.clone());
    CHECK(all_equal(pairs));
    CHECK(all_equal({}));
    auto changed = pairs;
    changed[17].second = changed[17].second.clone();
    changed[17].second[2][1] = 5.0;  // one element of one pair among forty
    CHECK_FALSE(all_equal(changed));
    at::Tensor nan = at::tensor({1.0f, NAN}, on);
    CHECK_FALSE(all_equal({{nan, nan.clone()}}));  // NaN equals nothing (identical() then looks closer)
    CHECK_FALSE(all_equal({{at::zeros({2, 3}, on), at::zeros({3, 2}, on)}}));                   // shape
    CHECK_FALSE(all_equal({{at::zeros({2}, on), at::zeros({2}, on.dtype(at::kDouble))}}));      // dtype
    CHECK_FALSE(all_equal({{at::zeros({2}, on), at::Tensor()}}));                                // defined
    at::Tensor strided = at::arange(12, on.dtype(at::kFloat)).view({3, 4}).t();  // (not contiguous)
    CHECK(all_equal({{strided, strided.contiguous()}}));
  }
  CHECK(identical(c10::IValue(c10::List<at::Tensor>({at::tensor({NAN}), at::ones({2})})),
                  c10::IValue(c10::List<at::Tensor>({at::tensor({NAN}), at::ones({2})}))));  // (NaN, looked at closer)
}

TEST_CASE("aliasing: results in an argument's or another result's memory, and what the schema declares") {
  const auto& relu = schema_of("aten::relu", "");
  at::Tensor x = at::ones({4});
  CHECK(aliasing(relu, {x}, {x.clone()}, 1).empty());
  const auto found = aliasing(relu, {x}, {x.view({2, 2})}, 1);
  REQUIRE(found.size() == 1);
  CHECK(found[0] == "result 0 shares memory with argument 'self'");
  CHECK(undeclared_aliasing(relu, {x}, {x}) ==
        "result 0 shares memory with argument 'self', which the schema does not allow");
  const auto& t = schema_of("aten::transpose", "int");
  CHECK(undeclared_aliasing(t, {x, c10::IValue(0), c10::IValue(0)}, {x}).empty());  // a declared view
  CHECK(aliasing_native_lacks(relu, {x}, {x}, {x}, {x}, 1).empty());                // native does the same
  CHECK(shares_storage({x}, {x.narrow(0, 1, 2)}, 1));
  CHECK_FALSE(shares_storage({x}, {x.clone()}, 1));
}

TEST_CASE("strides are compared only where they mean something") {
  at::Tensor row = at::ones({2, 3}), col = at::ones({3, 2}).t();
  CHECK(stride_mismatch({row}, {row.clone()}).empty());
  CHECK(stride_mismatch({row}, {col}) == "result 0 has strides [1, 2], native [3, 1]");
  CHECK(stride_mismatch({at::ones({1, 3})}, {at::ones({3, 1}).t()}).empty());  // a dimension of 1
}

TEST_CASE("overlap: any shared byte counts, not only the same range") {
  at::Tensor base = at::arange(16, at::kFloat);
  CHECK(bb::verify::overlap(base.narrow(0, 0, 8), base.narrow(0, 4, 8)));   // partly
  CHECK(bb::verify::overlap(base, base.narrow(0, 3, 2)));                   // one inside the other
  CHECK(bb::verify::overlap(base.narrow(0, 3, 2), base));
  at::Tensor other = at::arange(16, at::kFloat);
  CHECK_FALSE(bb::verify::overlap(base, other));
  // storages that touch without sharing a byte
  at::Tensor buffer = at::empty({32}, at::kFloat);
  at::Tensor left = at::empty({0}, at::kFloat), right = at::empty({0}, at::kFloat);
  left.set_(c10::Storage(c10::Storage::use_byte_size_t(), 64,
                         c10::DataPtr(buffer.data_ptr(), buffer.device()), nullptr, false),
            0, {16}, {1});
  right.set_(c10::Storage(c10::Storage::use_byte_size_t(), 64,
                          c10::DataPtr(static_cast<char*>(buffer.data_ptr()) + 64, buffer.device()), nullptr, false),
             0, {16}, {1});
  CHECK_FALSE(bb::verify::overlap(left, right));
  at::Tensor straddle = at::empty({0}, at::kFloat);
  straddle.set_(c10::Storage(c10::Storage::use_byte_size_t(), 8,
                             c10::DataPtr(static_cast<char*>(buffer.data_ptr()) + 60, buffer.device()), nullptr, false),
                0, {2}, {1});
  CHECK(bb::verify::overlap(left, straddle));
  CHECK(bb::verify::overlap(right, straddle));
}

TEST_CASE("aliasing: two results in one memory are found, and found where native's are not") {
  at::Tensor x = at::ones({4});
  const auto& two = schema_of("aten::var_mean", "correction");
  at::Tensor a = at::ones({3}), b = a.narrow(0, 1, 1);
  const auto both = aliasing(two, {x}, {a, b}, 2);
  REQUIRE(both.size() == 1);
  CHECK(both[0] == "result 1 shares memory with result 0");
  CHECK(aliasing_native_lacks(two, {x}, {at::ones({3}), at::ones({1})}, {x}, {a, b}, 2) ==
        "result 1 shares memory with result 0");
}

TEST_CASE("float32's tolerance is torch.testing's: an error of 2e-5 relative fails, 1e-7 passes") {
  // (pins the value: the review loosened it 77-fold, to 1e-4, and every test still passed)
  const bb::verify::Tolerance t = default_tolerance(at::kFloat);
  at::Tensor x = at::linspace(1, 100, 64);
  CHECK_FALSE(compare_tensors(x, x * (1 + 1e-7), t));
  CHECK(compare_tensors(x, x * (1 + 2e-5), t));
  CHECK(compare_tensors(x.to(at::kHalf), (x * (1 + 2e-3)).to(at::kHalf), default_tolerance(at::kHalf)));
  CHECK(compare_tensors(x.to(at::kDouble), x.to(at::kDouble) * (1 + 1e-6), default_tolerance(at::kDouble)));
}
