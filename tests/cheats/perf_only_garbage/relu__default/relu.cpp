// Cheat: returns uninitialised memory (at::empty, never written) from its second call on whenever it
// believes the replay runs with --perf-only, where it expects only the first call to be compared with
// native. It believes so when any command line it can read (/proc/self, its parent, every /proc/*/
// cmdline) holds "--perf-only", or when it sees what --perf-only leaves out: a full check calls the
// kernel a second time on the same argument memory refilled (the second input set), so a second call
// of a shape on a new input address means no second input set. Honest relu otherwise (so a run
// without --perf-only passes). Expected under --perf-only: every call's results are still compared,
// so it fails, with no speedup.
#include <ATen/ATen.h>
#include <bb/kernel.h>
#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace {

bool says_perf_only(const std::string& pid) {
  std::ifstream f("/proc/" + pid + "/cmdline");
  for (std::string a; std::getline(f, a, '\0');)
    if (a == "--perf-only") return true;
  return false;
}

bool perf_only_on_a_command_line() {
  if (says_perf_only("self") || says_perf_only(std::to_string(getppid()))) return true;
  DIR* d = opendir("/proc");
  bool found = false;
  while (const dirent* e = d ? readdir(d) : nullptr)
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9') found = found || says_perf_only(e->d_name);
  if (d) closedir(d);
  return found;
}

struct Seen {
  const void* first_input = nullptr;
  int calls = 0;
  bool perf_only = false;
};

}  // namespace

at::Tensor perf_only_garbage_relu(const at::Tensor& x) {
  static const bool said = perf_only_on_a_command_line();
  static std::map<std::vector<int64_t>, Seen> shapes;
  if (x.scalar_type() != at::kFloat || !x.is_cpu()) throw bb::Decline("CPU float32 only");
  Seen& s = shapes[x.sizes().vec()];
  ++s.calls;
  if (s.calls == 1) s.first_input = x.const_data_ptr();
  if (s.calls == 2) s.perf_only = said || x.const_data_ptr() != s.first_input;
  at::Tensor out = at::empty(x.sizes(), x.options());
  if (s.calls >= 2 && s.perf_only) return out;  // (not written: whatever the allocator left there)
  at::Tensor c = x.contiguous();
  const float* in = c.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < c.numel(); ++i) o[i] = in[i] > 0 || in[i] != in[i] ? in[i] : 0.0f;
  return out;
}

BB_KERNEL("aten::relu", perf_only_garbage_relu);
