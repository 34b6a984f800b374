// What a reference worker and its kernel worker say to each other (replay/workers/wire.h): values of every kind
// a call is made of come back as they went, tensors as their metadata; anything malformed is refused.
#include <ATen/ATen.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <thread>

#include "catch.h"
#include "replay/workers/remote_kernel.h"
#include "replay/workers/wire.h"

using namespace bb::replay;
using wire::json;

namespace {

// Tensors sent as their metadata and made again (empty, same layout) on the way back.
wire::Values round_trip(const wire::Values& v) {
  const json j = wire::encode(v, [](const at::Tensor& t) { return wire::meta_json(wire::meta_of(t)); });
  return wire::decode(json::parse(j.dump()), [](const json& t) {
    const wire::TensorMeta m = wire::meta_from(t);
    if (!m.defined) return at::Tensor();
    return at::empty_strided(m.sizes, m.strides, at::TensorOptions().dtype(m.dtype));
  });
}

}  // namespace

TEST_CASE("every kind of value a call is made of comes back as it went") {
  c10::List<std::optional<at::Tensor>> optional_tensors;
  optional_tensors.push_back(at::ones({2}));
  optional_tensors.push_back(std::nullopt);
  c10::List<at::Scalar> scalars;
  scalars.push_back(at::Scalar(1.5));
  scalars.push_back(at::Scalar(int64_t{3}));
  const wire::Values v = {c10::IValue(),
                          int64_t{-7},
                          true,
                          std::nan(""),
                          -INFINITY,
                          c10::complex<double>(1, -2),
                          std::string("mean"),
                          c10::Device("cpu"),
                          std::vector<int64_t>{3, 0, -1},
                          std::vector<double>{0.5},
                          std::vector<at::Tensor>{at::ones({2, 3}), at::ones({4}).t()},
                          optional_tensors,
                          scalars,
                          at::ones({3, 5}).t(),
                          at::Tensor()};
  const wire::Values back = round_trip(v);
  REQUIRE(back.size() == v.size());
  CHECK(back[0].isNone());
  CHECK(back[1].toInt() == -7);
  CHECK(back[2].toBool());
  CHECK(std::isnan(back[3].toDouble()));
  CHECK(back[4].toDouble() == -INFINITY);
  CHECK(back[5].toComplexDouble() == c10::complex<double>(1, -2));
  CHECK(back[6].toStringRef() == "mean");
  CHECK(back[7].toDevice() == c10::Device("cpu"));
  CHECK(back[8].toIntVector() == std::vector<int64_t>{3, 0, -1});
  CHECK(back[9].toDoubleVector() == std::vector<double>{0.5});
  REQUIRE(back[10].isTensorList());
  CHECK(back[10].toTensorVector()[1].sizes() == at::IntArrayRef{4});
  REQUIRE(back[11].isOptionalTensorList());
  CHECK_FALSE(back[11].toOptionalTensorList().get(1).has_value());
  REQUIRE(back[12].isList());
  CHECK(back[12].toList().elementType()->str() == "Scalar");
  CHECK(back[13].toTensor().strides() == at::IntArrayRef{1, 5});
  CHECK_FALSE(back[14].toTensor().defined());
  CHECK(wire::tensors_in(back).size() == 5);  // (a None in a list of optional tensors is no tensor)
}

TEST_CASE("a tensor's metadata keeps its storage: offset, size, address and a wrapped number's mark") {
  at::Tensor base = at::arange(20, at::kFloat);
  at::Tensor view = base.as_strided({2, 3}, {5, 1}, 4);
  const wire::TensorMeta m = wire::meta_from(wire::meta_json(wire::meta_of(view)));
  CHECK(m.offset == 4);
  CHECK(m.storage_bytes == 80);
  CHECK(m.address == reinterpret_cast<uint64_t>(base.data_ptr()));
  at::Tensor n = at::scalar_tensor(2.0, at::kDouble);
  n.unsafeGetTensorImpl()->set_wrapped_number(true);
  CHECK(wire::meta_from(wire::meta_json(wire::meta_of(n))).wrapped_number);
}

TEST_CASE("malformed values and metadata are refused, not trusted") {
  auto tensor = [](const json& t) {
    wire::meta_from(t);
    return at::Tensor();
  };
  CHECK_THROWS(wire::decode(json::parse(R"([{"k": "what"}])"), tensor));
  CHECK_THROWS(wire::decode(json::parse(R"([{"k": "list", "elem": "Generator", "items": []}])"), tensor));
  json bad = wire::meta_json(wire::meta_of(at::ones({2})));
  bad["sizes"] = {-1};
  CHECK_THROWS(wire::decode(json::array({{{"k", "tensor"}, {"t", bad}}}), tensor));
  bad = wire::meta_json(wire::meta_of(at::ones({2})));
  bad["dtype"] = 1000;
  CHECK_THROWS(wire::decode(json::array({{{"k", "tensor"}, {"t", bad}}}), tensor));
}

TEST_CASE("tensor_refs: the tensor references of encoded values, in decode()'s order, lists included") {
  std::vector<at::Tensor> list = {at::ones({1}), at::ones({2})};
  const wire::Values v = {at::ones({3}), int64_t{4}, list, c10::IValue(), at::ones({5})};
  int64_t next = 0;
  const json j = wire::encode(v, [&](const at::Tensor&) { return json(10 + next++); });
  CHECK(wire::tensor_refs(j) == std::vector<size_t>{10, 11, 12, 13});
  // (what decode() is given for each tensor, in the same order)
  std::vector<size_t> seen;
  wire::decode(j, [&](const json& t) {
    seen.push_back(t.get<size_t>());
    return at::ones({1});
  });
  CHECK(seen == wire::tensor_refs(j));
  CHECK_THROWS(wire::tensor_refs(json::parse(R"([{"k": "tensor"}])")));
  CHECK_THROWS(wire::tensor_refs(json::parse(R"([{"k": "tensor", "t": "a"}])")));
}

TEST_CASE("messages are framed; a closed channel and an oversized message are told apart") {
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  wire::send(sv[0], {{"cmd", "ping"}, {"text", std::string(100000, 'x')}});
  const json m = wire::receive(sv[1]);
  CHECK(m["cmd"] == "ping");
  CHECK(m["text"].get<std::string>().size() == 100000);
  wire::send(sv[0], {{"big", std::string(1000, 'y')}});
  CHECK_THROWS_AS(wire::receive(sv[1], 100), std::runtime_error);
  ::close(sv[0]);
  ::close(sv[1]);
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  ::close(sv[0]);
  CHECK_THROWS_AS(wire::receive(sv[1]), wire::Closed);
  ::close(sv[1]);
}

TEST_CASE("same_bytes compares the bytes of tensor elements: NaN payloads and bool bytes count") {
  using bb::replay::same_bytes;
  at::Tensor a = at::randn({3, 4});
  CHECK(same_bytes({a}, {a.clone()}));
  CHECK_FALSE(same_bytes({a}, {a + 1}));
  at::Tensor nan1 = at::full({2}, std::nan(""));
  at::Tensor nan2 = nan1.clone();
  reinterpret_cast<uint32_t*>(nan2.data_ptr())[0] ^= 1;  // another NaN
  CHECK_FALSE(same_bytes({nan1}, {nan2}));
  at::Tensor t = at::zeros({4}, at::kBool), u = t.clone();
  reinterpret_cast<uint8_t*>(u.data_ptr())[1] = 0xFF, reinterpret_cast<uint8_t*>(t.data_ptr())[1] = 1;  // both "true"
  CHECK_FALSE(same_bytes({t}, {u}));
  at::Tensor scalar = at::scalar_tensor(2.0);
  CHECK(same_bytes({scalar}, {scalar.clone()}));
  at::Tensor last_stride = at::randn({2, 192, 1, 1}).contiguous(at::MemoryFormat::ChannelsLast);
  CHECK(same_bytes({last_stride}, {last_stride.clone()}));
}

TEST_CASE("reuses: a later result in the memory of an earlier one, unless it is in its own call's arguments") {
  using bb::replay::RemoteRun;
  RemoteRun earlier, later;
  earlier.result_ranges = {{{1000, 2000}}};
  later.result_ranges = {{{1500, 1600}}};
  CHECK(bb::replay::reuses(earlier, later, 1));
  later.arg_ranges = {{1400, 1700}};  // an in-place result, inside its own argument
  CHECK_FALSE(bb::replay::reuses(earlier, later, 1));
  later.arg_ranges.clear();
  later.result_ranges = {{{2000, 3000}}};  // adjacent, not overlapping
  CHECK_FALSE(bb::replay::reuses(earlier, later, 1));
  later.result_ranges = {{}, {{1000, 1001}}};  // only the first `outputs` results count
  CHECK_FALSE(bb::replay::reuses(earlier, later, 1));
}
