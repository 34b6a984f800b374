// Signature keys (exact, cheap) and argument descriptions (what the trace says).
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <vector>

#include "catch.h"
#include "tracer/arg_key.h"
#include "tracer/int_range.h"

using bb::trace::ArgKind;
using bb::tracer::KeyWords;

namespace {

KeyWords key_of(const c10::IValue& v) {
  KeyWords k;
  bb::tracer::encode_key(v, k);
  return k;
}

const c10::Argument& schema_arg(const char* op, const char* overload, const char* name) {
  c10::OperatorHandle handle = c10::Dispatcher::singleton().findSchemaOrThrow(op, overload);
  for (const auto& a : handle.schema().arguments())
    if (a.name() == name) return a;
  FAIL("no argument " << name);
  throw;
}

}  // namespace

TEST_CASE("tensors with the same metadata share a key whatever their values") {
  CHECK(key_of(at::zeros({2, 3})) == key_of(at::ones({2, 3})));
}

TEST_CASE("every part of a tensor's metadata changes the key") {
  const auto base = key_of(at::zeros({2, 3}));
  CHECK(key_of(at::zeros({3, 2})) != base);                                                       // shape
  CHECK(key_of(at::zeros({3, 2}).t()) != base);                                                   // stride
  CHECK(key_of(at::zeros({2, 3}, at::kDouble)) != base);                                          // dtype
  CHECK(key_of(at::zeros({2, 4}).narrow(1, 1, 3)) != key_of(at::zeros({2, 4}).narrow(1, 0, 3)));  // offset
  CHECK(key_of(at::zeros({2, 3}, at::TensorOptions().device(at::kMeta))) != base);                // device
}

TEST_CASE("scalars, lists and strings are keyed by value") {
  CHECK(key_of(c10::IValue(int64_t{1})) != key_of(c10::IValue(int64_t{2})));
  CHECK(key_of(c10::IValue(1.0)) != key_of(c10::IValue(int64_t{1})));
  CHECK(key_of(c10::IValue(std::vector<int64_t>{1, 2})) != key_of(c10::IValue(std::vector<int64_t>{2, 1})));
  CHECK(key_of(c10::IValue("mean")) != key_of(c10::IValue("sum")));
  CHECK(key_of(c10::IValue("a-string-longer-than-8-1")) != key_of(c10::IValue("a-string-longer-than-8-2")));
  CHECK(key_of(c10::IValue()) == key_of(c10::IValue(at::Tensor())));  // None == undefined Tensor?
  CHECK(key_of(c10::IValue(true)) != key_of(c10::IValue(false)));
}

TEST_CASE("key hashing is deterministic and spreads") {
  KeyWords a{1, 2, 3}, b{1, 2, 4};
  CHECK(bb::tracer::hash_key(a.data(), 3) == bb::tracer::hash_key(a.data(), 3));
  CHECK(bb::tracer::hash_key(a.data(), 3) != bb::tracer::hash_key(b.data(), 3));
}

TEST_CASE("a key's words survive the buffer's growth, copies and moves") {
  KeyWords k;
  std::vector<uint64_t> expected;
  for (uint64_t i = 0; i < 1000; ++i) {  // single words and runs, across several growths
    if (i % 7 == 0) {
      uint64_t* w = k.append(3);
      for (uint64_t j = 0; j < 3; ++j) expected.push_back(w[j] = i * 1000 + j);
    } else {
      k.push_back(i);
      expected.push_back(i);
    }
  }
  REQUIRE(k.size() == expected.size());
  CHECK(std::equal(k.begin(), k.end(), expected.begin()));
  KeyWords copy = k;
  CHECK(copy == k);
  copy.truncate(10);
  CHECK(copy.size() == 10);
  CHECK(copy != k);
  CHECK(std::equal(copy.begin(), copy.end(), expected.begin()));
  KeyWords moved = std::move(k);
  CHECK(k.empty());  // NOLINT(bugprone-use-after-move): a moved-from key is empty
  CHECK(std::equal(moved.begin(), moved.end(), expected.begin(), expected.end()));
  moved.clear();
  CHECK(moved.empty());
  CHECK(moved == KeyWords{});
  CHECK(KeyWords{1, 2} != KeyWords{1, 2, 3});
}

TEST_CASE("a tensor's sizes, strides and offset are where the key says, in long lists too") {
  // A strided tensor: header, device, sizes, strides, storage offset.
  auto t = at::zeros({4, 6}).narrow(1, 2, 3);
  auto k = key_of(t);
  REQUIRE(k.size() == 7);
  CHECK(std::vector<uint64_t>(k.begin() + 2, k.end()) == std::vector<uint64_t>{4, 3, 6, 1, 2});
  // A list of 300 tensors of shapes [i + 1]: its key grows the buffer many times over while encoding.
  std::vector<at::Tensor> list;
  for (int64_t i = 0; i < 300; ++i) list.push_back(at::zeros({i + 1}));
  auto lk = key_of(c10::IValue(list));
  REQUIRE(lk.size() == 1 + 300 * 5);  // the list's header, then 5 words per 1-d tensor
  for (size_t i = 0; i < 300; ++i) {
    const uint64_t* w = lk.data() + 1 + i * 5;
    CHECK(w[2] == i + 1);  // size
    CHECK(w[3] == 1);      // stride
    CHECK(w[4] == 0);      // offset
  }
  CHECK(lk == key_of(c10::IValue(list)));
}

TEST_CASE("a tensor is described with dtype, shape, stride, device and offset") {
  auto t = at::zeros({4, 6}, at::kHalf).narrow(1, 2, 3);
  auto m = bb::tracer::describe_tensor(t);
  CHECK(m.dtype == "float16");
  CHECK(m.shape == std::vector<int64_t>{4, 3});
  CHECK(m.stride == std::vector<int64_t>{6, 1});
  CHECK(m.offset == 2);
  CHECK(m.device == "cpu");
  CHECK(m.layout == "strided");
  CHECK_FALSE(m.range);
}

TEST_CASE("enum-typed ints are described by name using the schema") {
  auto& dtype = schema_arg("aten::to", "dtype", "dtype");
  auto a = bb::tracer::describe_arg(c10::IValue(static_cast<int64_t>(at::kBFloat16)), &dtype, 1);
  CHECK(a.name == "dtype");
  CHECK(a.type == "ScalarType");
  CHECK(a.kind == ArgKind::ScalarType);
  CHECK(a.text == "bfloat16");
  auto& fmt = schema_arg("aten::empty", "memory_format", "memory_format");
  auto m = bb::tracer::describe_arg(c10::IValue(static_cast<int64_t>(at::MemoryFormat::ChannelsLast)), &fmt, 5);
  CHECK(m.kind == ArgKind::MemoryFormat);
  CHECK(m.text == "channels_last");
  auto& layout = schema_arg("aten::empty", "memory_format", "layout");
  CHECK(bb::tracer::describe_arg(c10::IValue(int64_t{0}), &layout, 2).text == "strided");
  // Without a schema an int stays an int.
  CHECK(bb::tracer::describe_arg(c10::IValue(int64_t{15}), nullptr, 3).kind == ArgKind::Int);
  CHECK(bb::tracer::describe_arg(c10::IValue(int64_t{15}), nullptr, 3).name == "arg3");
}

TEST_CASE("lists are described by what they hold") {
  c10::List<std::optional<at::Tensor>> opt;
  opt.push_back(std::nullopt);
  opt.push_back(at::zeros({3}, at::kLong));
  auto a = bb::tracer::describe_arg(c10::IValue(opt), nullptr, 0);
  CHECK(a.kind == ArgKind::OptTensorList);
  REQUIRE(a.tensors.size() == 2);
  CHECK_FALSE(a.tensors[0]);
  CHECK(a.tensors[1]->dtype == "int64");

  auto tl = bb::tracer::describe_arg(c10::IValue(std::vector<at::Tensor>{at::zeros({1}), at::zeros({2})}), nullptr, 0);
  CHECK(tl.kind == ArgKind::TensorList);
  CHECK(tl.tensors.size() == 2);

  auto dl = bb::tracer::describe_arg(c10::IValue(std::vector<double>{0.5, 2.0}), nullptr, 0);
  CHECK(dl.kind == ArgKind::FloatList);
  CHECK(dl.floats == std::vector<double>{0.5, 2.0});

  auto s = bb::tracer::describe_arg(c10::IValue("tanh"), nullptr, 0);
  CHECK(s.kind == ArgKind::String);
  CHECK(s.text == "tanh");
}

TEST_CASE("CPU integer tensors: value range read from memory, any layout") {
  auto t = at::arange(-5, 15, at::kLong).view({4, 5});
  CHECK(bb::tracer::cpu_int_range(t) == std::make_pair(int64_t{-5}, int64_t{14}));
  CHECK(bb::tracer::cpu_int_range(t.t()) == std::make_pair(int64_t{-5}, int64_t{14}));
  CHECK(bb::tracer::cpu_int_range(t.narrow(0, 1, 2).narrow(1, 1, 3)) == std::make_pair(int64_t{1}, int64_t{8}));
  CHECK(bb::tracer::cpu_int_range(at::full({}, 7, at::kInt)) == std::make_pair(int64_t{7}, int64_t{7}));
  CHECK(bb::tracer::cpu_int_range(at::arange(250, 256, at::kByte)) == std::make_pair(int64_t{250}, int64_t{255}));
  auto strided = at::arange(0, 100, at::kShort).view({10, 10}).slice(1, 0, 10, 3);  // step 3
  CHECK(bb::tracer::cpu_int_range(strided) == std::make_pair(int64_t{0}, int64_t{99}));
}

TEST_CASE("no value range for empty, float, bool or non-CPU tensors") {
  CHECK_FALSE(bb::tracer::cpu_int_range(at::zeros({0}, at::kLong)));
  CHECK_FALSE(bb::tracer::cpu_int_range(at::zeros({3})));
  CHECK_FALSE(bb::tracer::cpu_int_range(at::zeros({3}, at::kBool)));
  CHECK_FALSE(bb::tracer::cpu_int_range(at::zeros({3}, at::TensorOptions().dtype(at::kLong).device(at::kMeta))));
  CHECK_FALSE(bb::tracer::cpu_int_range(at::Tensor()));
  CHECK(bb::tracer::wants_range(at::kInt));
  CHECK_FALSE(bb::tracer::wants_range(at::kBool));
}
