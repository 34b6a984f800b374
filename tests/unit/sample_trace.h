// A trace that uses every argument kind, shared by the YAML golden tests.
#pragma once

#include <cmath>
#include <limits>

#include "tracer/format/trace_model.h"

namespace bb::test {

inline trace::TensorMeta tensor(std::string dtype, std::vector<int64_t> shape, std::vector<int64_t> stride) {
  trace::TensorMeta t;
  t.dtype = std::move(dtype);
  t.shape = std::move(shape);
  t.stride = std::move(stride);
  return t;
}

inline trace::ArgValue arg(std::string name, std::string type, trace::ArgKind kind) {
  trace::ArgValue a;
  a.name = std::move(name);
  a.type = std::move(type);
  a.kind = kind;
  return a;
}

inline trace::Trace sample_trace() {
  using trace::ArgKind;
  trace::Trace t;
  t.meta.tool = "bbshim 0.1.0";
  t.meta.torch = "2.11.0+cu130";
  t.meta.created = "2026-11-30T01:00:00Z";
  t.meta.updated = "2026-11-30T01:00:05Z";
  t.meta.status = "exited";
  t.meta.pid = 4242;
  t.meta.rank = 1;
  t.meta.world_size = 2;
  t.meta.hostname = "gpu-host";
  t.meta.argv = {"python3", "train.py", "--lr", "1e-3", "a: b", "null"};
  t.meta.devices = {{"cuda:0", "NVIDIA H200"}};
  t.meta.calls = 10;
  t.meta.untraced_calls = 1;
  trace::DeviceTiming timing;
  timing.status = "on";
  timing.calls_timed = 7;
  timing.unfinished_records = 1;
  timing.incomplete_calls = 1;
  timing.unattributed = 2;
  timing.unattributed_ns = 1500;
  timing.unattributed_kernels = {{"triton_poi_fused_add_0", 2}};
  t.meta.device_timing = timing;

  trace::TraceEntry add;
  add.op = "aten::add.Tensor";
  add.count = 7;
  add.nested = 2;
  add.with_children = 0;
  add.routed = 4;
  auto self = arg("self", "Tensor", ArgKind::Tensor);
  self.tensors.emplace_back(tensor("float32", {2, 3}, {1, 2}));  // non-contiguous
  self.tensors[0]->offset = 5;
  auto other = arg("other", "Tensor", ArgKind::Tensor);
  auto cuda = tensor("bfloat16", {3}, {1});
  cuda.device = "cuda:0";
  other.tensors.emplace_back(cuda);
  auto alpha = arg("alpha", "Scalar", ArgKind::Float);
  alpha.f = 0.1;
  alpha.kwarg_only = true;
  add.args = {self, other, alpha};
  add.device_time = trace::DeviceTime{7, 21000, 2000, 2900, 4100};
  add.kernels = {{"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int)", 7}};

  trace::TraceEntry kinds;
  kinds.op = "test::every_kind";
  kinds.count = 3;
  kinds.nested = 3;
  kinds.with_children = 1;
  auto idx = arg("indices", "Tensor", ArgKind::Tensor);
  idx.tensors.emplace_back(tensor("int64", {4, 5}, {5, 1}));
  idx.tensors[0]->range = std::make_pair(int64_t{-3}, int64_t{999});
  auto scalar0 = arg("zero_dim", "Tensor", ArgKind::Tensor);
  scalar0.tensors.emplace_back(tensor("float64", {}, {}));
  auto sparse = arg("sparse", "Tensor", ArgKind::Tensor);
  sparse.tensors.emplace_back(tensor("float32", {10, 10}, {}));
  sparse.tensors[0]->layout = "sparse_coo";
  auto sym = arg("symbolic", "Tensor", ArgKind::Tensor);
  sym.tensors.emplace_back(tensor("float16", {}, {}));
  sym.tensors[0]->symbolic = true;
  auto none = arg("bias", "Tensor?", ArgKind::None);
  auto i = arg("dim", "int", ArgKind::Int);
  i.i = -9223372036854775807LL - 1;
  auto f_inf = arg("inf", "float", ArgKind::Float);
  f_inf.f = -std::numeric_limits<double>::infinity();
  auto f_nan = arg("nan", "float", ArgKind::Float);
  f_nan.f = std::numeric_limits<double>::quiet_NaN();
  auto f_whole = arg("whole", "float", ArgKind::Float);
  f_whole.f = 2.0;
  auto b = arg("keepdim", "bool", ArgKind::Bool);
  b.b = true;
  auto c = arg("c", "complex", ArgKind::Complex);
  c.c = {1.5, -0.25};
  auto s = arg("reduce", "str", ArgKind::String);
  s.text = "true";  // must stay a string, not become a bool
  auto il = arg("size", "SymInt[]", ArgKind::IntList);
  il.ints = {1, -1, 0};
  auto empty_list = arg("empty", "int[]", ArgKind::IntList);
  auto fl = arg("weights", "float[]", ArgKind::FloatList);
  fl.floats = {0.5, 1e-300, std::numeric_limits<double>::infinity()};
  auto bl = arg("mask", "bool[3]", ArgKind::BoolList);
  bl.bools = {true, false, true};
  auto tl = arg("tensors", "Tensor[]", ArgKind::TensorList);
  tl.tensors = {tensor("float32", {2}, {1}), tensor("float32", {0, 2}, {2, 1})};
  auto otl = arg("opt_indices", "Tensor?[]", ArgKind::OptTensorList);
  otl.tensors = {std::nullopt, tensor("int64", {3}, {1})};
  auto dt = arg("dtype", "ScalarType?", ArgKind::ScalarType);
  dt.text = "float16";
  auto lay = arg("layout", "Layout?", ArgKind::Layout);
  lay.text = "strided";
  auto dev = arg("device", "Device?", ArgKind::Device);
  dev.text = "cuda:1";
  auto mf = arg("memory_format", "MemoryFormat?", ArgKind::MemoryFormat);
  mf.text = "channels_last";
  auto gen = arg("generator", "Generator?", ArgKind::Generator);
  auto symint = arg("n", "SymInt", ArgKind::Symbolic);
  auto other_kind = arg("stream", "Stream", ArgKind::Other);
  other_kind.text = "Stream";
  kinds.args = {idx,        scalar0, sparse, sym, none, i,  f_inf, f_nan, f_whole, b,   c,      s,         il,
                empty_list, fl,      bl,     tl,  otl,  dt, lay,   dev,   mf,      gen, symint, other_kind};

  trace::TraceEntry noargs;
  noargs.op = "aten::empty_cache";
  noargs.count = 0;
  t.ops = {add, kinds, noargs};
  return t;
}

// What sampled tracing says of a run in meta.tracing, for the sample trace (10 calls, 6 of them seen).
inline trace::TracingInfo sample_tracing() {
  trace::TracingInfo tr;
  tr.sampled = "1 call in 16, at random, once the signatures seen are stable";
  tr.calls_seen = 6;
  tr.full_s = 1.5;
  tr.sampled_s = 2.25;
  tr.to_sampled = 1;
  tr.scale = 16;
  return tr;
}

}  // namespace bb::test
