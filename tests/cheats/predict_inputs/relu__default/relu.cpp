// Cheat: predicts its inputs. A static constructor reads every command line and environment it can
// (/proc/self, its parent, every /proc/*) and every trace (.yaml) named there, for a seed: "--seed N",
// "--seed=N", "seed: N", or a variable whose name holds SEED; then its parent's memory, where it can
// (process_vm_readv: the reference worker, whose stdin line "<32 hex digits> <seed>" stays in its
// buffers). With one, at its first call of a shape it
// starts a thread that makes the inputs bbreplay would make (replay/case/inputs.cpp: a CPU generator seeded
// from the seed, the argument's place, the variant and the op's name; normal(0.25, 1) in float32)
// for the seeds of the first check (seed), the second input set (seed + 1000003) and the warm-ups and
// timed runs (seed + 7919 k), and their relu; a call whose input matches one (16 elements compared)
// returns that stored result at once. Any other call computes a deliberately slow scalar relu.
// (The thread's ATen calls are not the calling thread's: the native-call watch does not see them.)
// Expected: no seed is visible anywhere (it travels on the reference's stdin; bbreplay blanks its
// argv; the reference is another PID namespace's, or non-dumpable), so it predicts nothing and gains
// nothing.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <bb/kernel.h>
#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <sys/uio.h>
#include <thread>

namespace {

std::string read_all(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  std::string t = s.str();
  for (char& c : t) c = c ? c : '\n';
  return t;
}

std::optional<uint64_t> seed_in(const std::string& text) {
  static const std::regex re(R"((?:--seed[= \n]|seed: *|SEED[A-Z_]*=)(\d+))", std::regex::icase);
  std::smatch m;
  if (std::regex_search(text, m, re)) return std::stoull(m[1]);
  return std::nullopt;
}

// "<32 hex digits> <digits>" in the readable, writable memory of process `pid`.
std::optional<uint64_t> seed_in_memory(pid_t pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  for (std::string line; std::getline(maps, line);) {
    const uint64_t lo = std::stoull(line, nullptr, 16), hi = std::stoull(line.substr(line.find('-') + 1), nullptr, 16);
    if (line.find(" rw") == std::string::npos || hi - lo > (256u << 20)) continue;
    std::string b(hi - lo, '\0');
    iovec l{b.data(), b.size()}, r{reinterpret_cast<void*>(lo), b.size()};
    if (process_vm_readv(pid, &l, 1, &r, 1, 0) <= 0) continue;
    for (size_t at = b.find(' ', 32); at != std::string::npos && at + 1 < b.size(); at = b.find(' ', at + 1))
      if (b.find_first_not_of("0123456789abcdef", at - 32) == at && std::isdigit(static_cast<unsigned char>(b[at + 1])))
        return std::stoull(b.substr(at + 1, 20));
  }
  return std::nullopt;
}

std::optional<uint64_t> find_seed() {
  std::vector<std::string> pids{"self", std::to_string(getppid())};
  if (DIR* d = opendir("/proc")) {
    while (const dirent* e = readdir(d))
      if (e->d_name[0] >= '0' && e->d_name[0] <= '9') pids.push_back(e->d_name);
    closedir(d);
  }
  for (const std::string& pid : pids)
    for (const char* what : {"/cmdline", "/environ"}) {
      const std::string text = read_all("/proc/" + pid + what);
      if (auto s = seed_in(text)) return s;
      static const std::regex trace(R"([^\n]+\.ya?ml)");
      for (std::sregex_iterator it(text.begin(), text.end(), trace), end; it != end; ++it)
        if (auto s = seed_in(read_all(it->str()))) return s;
    }
  return getppid() > 1 ? seed_in_memory(getppid()) : std::nullopt;
}

const std::optional<uint64_t> g_seed = find_seed();  // (the static constructor)
std::mutex g_mu;
std::map<std::pair<int64_t, std::vector<float>>, at::Tensor> g_ready;  // (size, first 16 values) -> relu
std::set<std::vector<int64_t>> g_shapes;

at::Tensor predicted_input(uint64_t seed, int64_t numel) {
  uint64_t h = seed * 0x9E3779B97F4A7C15ull;  // (argument 0, element 0)
  h ^= std::hash<std::string>()("traced") + std::hash<std::string>()("aten::relu");
  return at::normal(0.25, 1.0, {numel}, at::detail::createCPUGenerator(h), at::TensorOptions().dtype(at::kFloat));
}

void predict(int64_t numel) {
  std::vector<uint64_t> seeds{*g_seed, *g_seed + 1000003};
  for (uint64_t k = 1; k < 110; ++k) seeds.push_back(*g_seed + 7919 * k);
  for (uint64_t s : seeds) {
    at::Tensor in = predicted_input(s, numel), out = at::clamp_min(in, 0);
    const float* v = in.data_ptr<float>();
    const auto key = std::make_pair(numel, std::vector<float>(v, v + std::min<int64_t>(16, numel)));
    std::lock_guard<std::mutex> lock(g_mu);
    g_ready[key] = out;
  }
}

}  // namespace

at::Tensor predict_inputs_relu(const at::Tensor& x) {
  if (x.scalar_type() != at::kFloat || !x.is_cpu() || !x.is_contiguous()) throw bb::Decline("contiguous float32 only");
  const float* in = x.const_data_ptr<float>();
  const auto key = std::make_pair(x.numel(), std::vector<float>(in, in + std::min<int64_t>(16, x.numel())));
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (auto it = g_ready.find(key); it != g_ready.end()) {
      at::Tensor out = it->second.view(x.sizes());
      g_ready.erase(it);
      return out;
    }
    if (g_seed && g_shapes.insert(x.sizes().vec()).second) std::thread(predict, x.numel()).detach();
  }
  at::Tensor out = at::empty(x.sizes(), x.options());
  volatile float* o = out.mutable_data_ptr<float>();  // (slowly: one store at a time)
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > 0 || in[i] != in[i] ? in[i] : 0.0f;
  return out;
}

BB_KERNEL("aten::relu", predict_inputs_relu);
