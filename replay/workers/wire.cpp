#include "replay/workers/wire.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace bb::replay::wire {
namespace {

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw Closed(std::string("the other process is gone (write: ") + std::strerror(errno) + ")");
    p += w, n -= static_cast<size_t>(w);
  }
}

void read_all(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) throw Closed("the other process is gone (end of its channel)");
    if (r < 0) throw Closed(std::string("the other process is gone (read: ") + std::strerror(errno) + ")");
    p += r, n -= static_cast<size_t>(r);
  }
}

uint64_t bits_of(double d) {
  uint64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}
double double_of(uint64_t b) {
  double d;
  std::memcpy(&d, &b, sizeof d);
  return d;
}

json number(const c10::IValue& v) {
  if (v.isInt()) return {{"k", "int"}, {"v", v.toInt()}};
  if (v.isBool()) return {{"k", "bool"}, {"v", v.toBool()}};
  if (v.isDouble()) return {{"k", "double"}, {"v", bits_of(v.toDouble())}};
  const c10::complex<double> c = v.toComplexDouble();
  return {{"k", "complex"}, {"re", bits_of(c.real())}, {"im", bits_of(c.imag())}};
}

c10::IValue number_from(const json& j) {
  const std::string k = j.at("k");
  if (k == "int") return j.at("v").get<int64_t>();
  if (k == "bool") return j.at("v").get<bool>();
  if (k == "double") return double_of(j.at("v").get<uint64_t>());
  if (k == "complex")
    return c10::complex<double>(double_of(j.at("re").get<uint64_t>()), double_of(j.at("im").get<uint64_t>()));
  throw std::runtime_error("unknown value kind '" + k + "'");
}

// The element type of a generic list, by name, for the lists calls are made of.
c10::TypePtr element_type(const std::string& name) {
  if (name == "Scalar") return c10::NumberType::get();
  if (name == "int") return c10::IntType::get();
  if (name == "float") return c10::FloatType::get();
  if (name == "bool") return c10::BoolType::get();
  if (name == "str") return c10::StringType::get();
  if (name == "Tensor") return c10::TensorType::get();
  if (name == "Tensor?") return c10::OptionalType::create(c10::TensorType::get());
  throw std::runtime_error("a list of '" + name + "' cannot be sent");
}

json encode_one(const c10::IValue& v, const std::function<json(const at::Tensor&)>& tensor) {
  if (v.isNone()) return {{"k", "none"}};
  if (v.isTensor()) return {{"k", "tensor"}, {"t", tensor(v.toTensor())}};
  if (v.isInt() || v.isBool() || v.isDouble() || v.isComplexDouble()) return number(v);
  if (v.isString()) return {{"k", "str"}, {"v", v.toStringRef()}};
  if (v.isDevice()) return {{"k", "device"}, {"v", v.toDevice().str()}};
  if (v.isList()) {
    json items = json::array();
    for (const auto& x : v.toListRef()) items.push_back(encode_one(x, tensor));
    std::string elem = v.toList().elementType()->str();
    if (v.isOptionalTensorList()) elem = "Tensor?";
    return {{"k", "list"}, {"elem", elem}, {"items", items}};
  }
  throw std::runtime_error("a value of type " + v.tagKind() + " cannot be sent");
}

c10::IValue decode_one(const json& j, const std::function<at::Tensor(const json&)>& tensor) {
  const std::string k = j.at("k");
  if (k == "none") return c10::IValue();
  if (k == "tensor") return tensor(j.at("t"));
  if (k == "str") return j.at("v").get<std::string>();
  if (k == "device") return c10::Device(j.at("v").get<std::string>());
  if (k != "list") return number_from(j);
  const std::string elem = j.at("elem");
  const json& items = j.at("items");
  if (elem == "Tensor") {
    std::vector<at::Tensor> out;
    for (const auto& x : items) out.push_back(decode_one(x, tensor).toTensor());
    return out;
  }
  if (elem == "Tensor?") {
    c10::List<std::optional<at::Tensor>> out;
    for (const auto& x : items) {
      c10::IValue v = decode_one(x, tensor);
      out.push_back(v.isNone() ? std::nullopt : std::optional<at::Tensor>(v.toTensor()));
    }
    return out;
  }
  c10::impl::GenericList out(element_type(elem));
  for (const auto& x : items) out.push_back(decode_one(x, tensor));
  return out;
}

void collect(const c10::IValue& v, std::vector<at::Tensor>& out) {
  if (v.isTensor()) out.push_back(v.toTensor());
  else if (v.isList())
    for (const auto& x : v.toListRef()) collect(x, out);
}

}  // namespace

void send(int fd, const json& message) {
  const std::string text = message.dump(-1, ' ', false, json::error_handler_t::replace);
  const uint32_t n = static_cast<uint32_t>(text.size());
  const char head[4] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                        static_cast<char>((n >> 16) & 0xff), static_cast<char>(n >> 24)};
  std::string frame(head, 4);
  frame += text;
  write_all(fd, frame.data(), frame.size());
}

json receive(int fd, size_t limit) {
  unsigned char head[4];
  read_all(fd, reinterpret_cast<char*>(head), 4);
  const size_t n = head[0] | (head[1] << 8) | (head[2] << 16) | (static_cast<size_t>(head[3]) << 24);
  if (n > limit) throw std::runtime_error("a message of " + std::to_string(n) + " bytes (more than the limit)");
  std::string text(n, '\0');
  read_all(fd, text.data(), n);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("a malformed message: ") + e.what());
  }
}

TensorMeta meta_of(const at::Tensor& t) {
  TensorMeta m;
  m.defined = t.defined();
  if (!m.defined) return m;
  m.dtype = t.scalar_type();
  m.sizes = t.sizes().vec();
  m.strides = t.strides().vec();
  m.offset = t.storage_offset();
  m.device = t.device();
  m.wrapped_number = t.unsafeGetTensorImpl()->is_wrapped_number();
  if (t.has_storage()) {
    m.storage_bytes = t.storage().nbytes();
    m.address = reinterpret_cast<uint64_t>(t.storage().data());
  }
  return m;
}

json meta_json(const TensorMeta& m) {
  if (!m.defined) return {{"defined", false}};
  return {{"defined", true},
          {"dtype", static_cast<int>(m.dtype)},
          {"sizes", m.sizes},
          {"strides", m.strides},
          {"offset", m.offset},
          {"bytes", m.storage_bytes},
          {"address", m.address},
          {"device", m.device.str()},
          {"wrapped", m.wrapped_number}};
}

TensorMeta meta_from(const json& j) {
  TensorMeta m;
  m.defined = j.at("defined").get<bool>();
  if (!m.defined) return m;
  const int dtype = j.at("dtype").get<int>();
  if (dtype < 0 || dtype >= static_cast<int>(c10::ScalarType::NumOptions))
    throw std::runtime_error("unknown dtype " + std::to_string(dtype));
  m.dtype = static_cast<c10::ScalarType>(dtype);
  m.sizes = j.at("sizes").get<std::vector<int64_t>>();
  m.strides = j.at("strides").get<std::vector<int64_t>>();
  m.offset = j.at("offset").get<int64_t>();
  m.storage_bytes = j.at("bytes").get<uint64_t>();
  m.address = j.at("address").get<uint64_t>();
  m.device = c10::Device(j.at("device").get<std::string>());
  m.wrapped_number = j.at("wrapped").get<bool>();
  if (m.sizes.size() != m.strides.size() || m.offset < 0) throw std::runtime_error("malformed tensor sizes or strides");
  for (size_t d = 0; d < m.sizes.size(); ++d)
    if (m.sizes[d] < 0 || m.strides[d] < 0) throw std::runtime_error("negative sizes or strides");
  return m;
}

json encode(const Values& values, const std::function<json(const at::Tensor&)>& tensor) {
  json out = json::array();
  for (const auto& v : values) out.push_back(encode_one(v, tensor));
  return out;
}

Values decode(const json& values, const std::function<at::Tensor(const json&)>& tensor) {
  try {
    Values out;
    for (const auto& j : values) out.push_back(decode_one(j, tensor));
    return out;
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("malformed values: ") + e.what());
  } catch (const c10::Error& e) {
    throw std::runtime_error(std::string("malformed values: ") + e.what_without_backtrace());
  }
}

std::vector<size_t> tensor_refs(const json& values) {
  std::vector<size_t> out;
  const std::function<void(const json&)> visit = [&](const json& j) {
    const std::string k = j.at("k");
    if (k == "tensor") out.push_back(j.at("t").get<size_t>());
    else if (k == "list")
      for (const auto& x : j.at("items")) visit(x);
  };
  try {
    for (const auto& j : values) visit(j);
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("malformed values: ") + e.what());
  }
  return out;
}

std::vector<at::Tensor> tensors_in(const Values& values) {
  std::vector<at::Tensor> out;
  for (const auto& v : values) collect(v, out);
  return out;
}

}  // namespace bb::replay::wire
