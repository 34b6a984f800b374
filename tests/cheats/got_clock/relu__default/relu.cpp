// Cheat: on its first call it finds libbbreplay.so among the loaded objects (dl_iterate_phdr), walks
// its dynamic section (PT_DYNAMIC: DT_JMPREL/DT_RELA relocations, DT_SYMTAB/DT_STRTAB names) to the GOT
// entries of clock_gettime and std::chrono::steady_clock::now (whichever it imports), makes their page
// writable (mprotect: the GOT is under full RELRO) and points them at clocks of its own, which read
// the real clock less an offset. On every call it adds 90% of its own run to that offset when it
// returns, so that a caller reading either clock before and after the call sees a tenth of the run.
// The kernel itself is a deliberately slow scalar relu (200 us of busy work first).
// Expected: timer-tampering (bbreplay's GOT changed), and no speedup.
#include <ATen/ATen.h>
#include <bb/kernel.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>

namespace {

std::atomic<int64_t> g_offset_ns{0};  // how far the faked clocks are behind the real one
using ClockGettime = int (*)(clockid_t, timespec*);
using SteadyNow = std::chrono::steady_clock::time_point (*)();

int fake_clock_gettime(clockid_t id, timespec* ts) {
  const int r = clock_gettime(id, ts);  // (ours goes through our own GOT: the real one)
  const int64_t ns = ts->tv_sec * 1000000000ll + ts->tv_nsec - g_offset_ns.load();
  ts->tv_sec = ns / 1000000000ll, ts->tv_nsec = ns % 1000000000ll;
  return r;
}

std::chrono::steady_clock::time_point fake_steady_now() {
  return std::chrono::steady_clock::now() - std::chrono::nanoseconds(g_offset_ns.load());
}

// Points libbbreplay.so's GOT entry for `symbol` at `to`; true when it found one.
bool patch(const dl_phdr_info* info, const char* symbol, void* to) {
  const ElfW(Dyn)* dyn = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (!dyn) return false;
  auto at = [&](ElfW(Addr) v) { return v >= info->dlpi_addr ? v : info->dlpi_addr + v; };
  const ElfW(Sym)* syms = nullptr;
  const char* names = nullptr;
  ElfW(Addr) tables[2] = {0, 0};
  size_t sizes[2] = {0, 0};
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_SYMTAB) syms = reinterpret_cast<const ElfW(Sym)*>(at(d->d_un.d_ptr));
    if (d->d_tag == DT_STRTAB) names = reinterpret_cast<const char*>(at(d->d_un.d_ptr));
    if (d->d_tag == DT_JMPREL) tables[0] = at(d->d_un.d_ptr);
    if (d->d_tag == DT_PLTRELSZ) sizes[0] = d->d_un.d_val;
    if (d->d_tag == DT_RELA) tables[1] = at(d->d_un.d_ptr);
    if (d->d_tag == DT_RELASZ) sizes[1] = d->d_un.d_val;
  }
  bool found = false;
  for (int t = 0; t < 2 && syms && names; ++t)
    for (size_t k = 0; tables[t] && k < sizes[t] / sizeof(ElfW(Rela)); ++k) {
      const auto& r = reinterpret_cast<const ElfW(Rela)*>(tables[t])[k];
      if (std::strcmp(names + syms[ELF64_R_SYM(r.r_info)].st_name, symbol) != 0) continue;
      auto* slot = reinterpret_cast<void**>(info->dlpi_addr + r.r_offset);
      const long page = sysconf(_SC_PAGESIZE);
      void* first = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(slot) & ~(page - 1));
      if (mprotect(first, page, PROT_READ | PROT_WRITE) == 0) *slot = to, found = true;
    }
  return found;
}

int patch_bbreplay(dl_phdr_info* info, size_t, void* found) {
  if (!std::strstr(info->dlpi_name, "libbbreplay")) return 0;
  *static_cast<int*>(found) += patch(info, "clock_gettime", reinterpret_cast<void*>(&fake_clock_gettime));
  *static_cast<int*>(found) += patch(info, "_ZNSt6chrono3_V212steady_clock3nowEv", reinterpret_cast<void*>(&fake_steady_now));
  return 1;
}

}  // namespace

at::Tensor got_clock_relu(const at::Tensor& x) {
  static int patched = [] { int n = 0; dl_iterate_phdr(patch_bbreplay, &n); return n; }();
  (void)patched;
  const auto start = std::chrono::steady_clock::now();
  if (x.scalar_type() != at::kFloat || !x.is_cpu()) throw bb::Decline("CPU float32 only");
  while (std::chrono::steady_clock::now() - start < std::chrono::microseconds(200)) {
  }
  at::Tensor c = x.contiguous(), out = at::empty(x.sizes(), x.options());
  const float* in = c.const_data_ptr<float>();
  volatile float* o = out.mutable_data_ptr<float>();  // (volatile: one store at a time, slowly)
  for (int64_t i = 0; i < c.numel(); ++i) o[i] = in[i] > 0 || in[i] != in[i] ? in[i] : 0.0f;
  g_offset_ns += (std::chrono::steady_clock::now() - start).count() * 9 / 10;
  return out;
}

BB_KERNEL("aten::relu", got_clock_relu);
