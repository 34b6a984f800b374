#include "replay/workers/tamper.h"

#include <ATen/core/dispatch/OperatorEntry.h>
#include <dirent.h>
#include <elf.h>
#include <link.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>

#include <cerrno>
#include <cstddef>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

// The bounds of the timing path's section (the linker defines them).
extern "C" {
extern const char __start_bb_timing_path[] __attribute__((weak, visibility("hidden")));
extern const char __stop_bb_timing_path[] __attribute__((weak, visibility("hidden")));
}

namespace bb::replay {

BB_TIMING_PATH uint64_t raw_monotonic_ns() {
  struct timespec ts {};
#if defined(__x86_64__)
  long ret;
  asm volatile("syscall"
               : "=a"(ret)
               : "0"(static_cast<long>(SYS_clock_gettime)), "D"(static_cast<long>(CLOCK_MONOTONIC)), "S"(&ts)
               : "rcx", "r11", "memory");
  (void)ret;
#elif defined(__aarch64__)
  register long x8 asm("x8") = SYS_clock_gettime;
  register long x0 asm("x0") = CLOCK_MONOTONIC;
  register long x1 asm("x1") = reinterpret_cast<long>(&ts);
  asm volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1) : "memory");
#else
  clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

namespace {

// Four lanes of 8-byte words (independent chains: a few hundred µs less a case over bbreplay's 2 MB of
// code than one chain), folded at the end. Not a cryptographic hash: the code is compared with itself.
uint64_t hash_bytes(const void* p, size_t n, uint64_t h = 0x243F6A8885A308D3ull) {
  const auto* b = static_cast<const unsigned char*>(p);
  uint64_t lane[4] = {h, h ^ 0x13198A2E03707344ull, h ^ 0xA4093822299F31D0ull, h ^ 0x082EFA98EC4E6C89ull};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, b + i + 8 * k, 8);
      lane[k] = (lane[k] ^ w) * 0x9E3779B97F4A7C15ull;
      lane[k] ^= lane[k] >> 29;
    }
  h = lane[0] ^ (lane[1] * 3) ^ (lane[2] * 5) ^ (lane[3] * 7);
  for (; i < n; ++i) h = (h ^ b[i]) * 0x100000001B3ull;
  return h;
}

// The loaded object that holds this function: its load address and program headers.
struct Object {
  uintptr_t base = 0;
  const ElfW(Phdr)* phdr = nullptr;
  int phnum = 0;
};

int find_self(struct dl_phdr_info* info, size_t, void* data) {
  auto* out = static_cast<Object*>(data);
  const auto self = reinterpret_cast<uintptr_t>(&take_code_image);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& p = info->dlpi_phdr[i];
    const uintptr_t lo = info->dlpi_addr + p.p_vaddr;
    if (p.p_type == PT_LOAD && self >= lo && self < lo + p.p_memsz) {
      *out = {info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum};
      return 1;
    }
  }
  return 0;
}

bool function_relocation(uint64_t type) {
#if defined(__x86_64__)
  return type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT;
#elif defined(__aarch64__)
  return type == R_AARCH64_JUMP_SLOT || type == R_AARCH64_GLOB_DAT;
#else
  (void)type;
  return false;
#endif
}

// The first 16 bytes of every function the object's GOT points to, hashed.
uint64_t hash_targets(const Object& o, size_t* count) {
  const ElfW(Dyn)* dyn = nullptr;
  for (int i = 0; i < o.phnum; ++i)
    if (o.phdr[i].p_type == PT_DYNAMIC) dyn = reinterpret_cast<const ElfW(Dyn)*>(o.base + o.phdr[i].p_vaddr);
  if (!dyn) return 0;
  // (ld.so relocates some of these entries in place, others not: an address below the base is an offset)
  auto at = [&](uint64_t v) { return v >= o.base ? v : o.base + v; };
  const ElfW(Sym)* symtab = nullptr;
  std::vector<std::pair<const ElfW(Rela)*, size_t>> tables;
  uint64_t rela = 0, relasz = 0, jmprel = 0, pltrelsz = 0;
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_SYMTAB) symtab = reinterpret_cast<const ElfW(Sym)*>(at(d->d_un.d_ptr));
    if (d->d_tag == DT_RELA) rela = at(d->d_un.d_ptr);
    if (d->d_tag == DT_RELASZ) relasz = d->d_un.d_val;
    if (d->d_tag == DT_JMPREL) jmprel = at(d->d_un.d_ptr);
    if (d->d_tag == DT_PLTRELSZ) pltrelsz = d->d_un.d_val;
  }
  if (!symtab) return 0;
  uint64_t h = 0;
  for (auto [table, bytes] : {std::pair<uint64_t, uint64_t>{rela, relasz}, {jmprel, pltrelsz}}) {
    if (!table) continue;
    const auto* r = reinterpret_cast<const ElfW(Rela)*>(table);
    for (size_t k = 0; k < bytes / sizeof(ElfW(Rela)); ++k) {
      if (!function_relocation(ELF64_R_TYPE(r[k].r_info))) continue;
      const ElfW(Sym)& s = symtab[ELF64_R_SYM(r[k].r_info)];
      const int type = ELF64_ST_TYPE(s.st_info);
      if (type != STT_FUNC && type != STT_GNU_IFUNC) continue;
      const uintptr_t target = *reinterpret_cast<const uintptr_t*>(o.base + r[k].r_offset);
      h = hash_bytes(&target, sizeof target, h);
      if (target) h = hash_bytes(reinterpret_cast<const void*>(target), 16, h);
      ++*count;
    }
  }
  return h;
}

std::string status_field(const std::string& name) {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind(name + ":", 0) == 0) {
      std::string v = line.substr(name.size() + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  return "";
}

// Registrations of an operator, from the dispatcher's own record of it: an OperatorHandle's first member
// points to the dispatcher's OperatorDef { OperatorEntry op; size_t def_count; size_t def_and_impl_count; }
// (c10/core/dispatch/Dispatcher.h). Checked against the entry's name before it is trusted.
const size_t* registrations(const c10::OperatorHandle& h) {
  const char* def = *reinterpret_cast<const char* const*>(&h);
  const auto* entry = reinterpret_cast<const c10::impl::OperatorEntry*>(def);
  if (!(entry->operator_name() == h.operator_name())) return nullptr;
  return reinterpret_cast<const size_t*>(def + sizeof(c10::impl::OperatorEntry) + sizeof(size_t));
}

size_t registration_count(const c10::OperatorHandle& h, bool by_layout) {
  if (by_layout) return *registrations(h);
  return std::hash<std::string>()(h.dumpState());
}

std::vector<bool> fallbacks() {
  std::vector<bool> out;
  auto& d = c10::Dispatcher::singleton();
  for (int k = 0; k <= static_cast<int>(c10::DispatchKey::EndOfRuntimeBackendKeys); ++k)
    out.push_back(d.hasBackendFallbackForDispatchKey(static_cast<c10::DispatchKey>(k)));
  return out;
}

}  // namespace

CodeImage take_code_image(bool whole) {
  CodeImage img;
  Object o;
  if (!dl_iterate_phdr(find_self, &o)) {
    img.error = "bbreplay's library was not found among the loaded objects";
    return img;
  }
  if (__start_bb_timing_path && __stop_bb_timing_path > __start_bb_timing_path)
    img.timing_path = hash_bytes(__start_bb_timing_path, static_cast<size_t>(__stop_bb_timing_path - __start_bb_timing_path));
  for (int i = 0; i < o.phnum; ++i) {
    const ElfW(Phdr)& p = o.phdr[i];
    const void* at = reinterpret_cast<const void*>(o.base + p.p_vaddr);
    if (whole && p.p_type == PT_LOAD && (p.p_flags & PF_X)) img.text = hash_bytes(at, p.p_memsz, img.text);
    if (p.p_type == PT_GNU_RELRO) img.relro = hash_bytes(at, p.p_memsz, img.relro);
  }
  img.targets = hash_targets(o, &img.functions);
  return img;
}

std::string code_changes(const CodeImage& before, bool whole) {
  if (!before.error.empty()) return "";
  const CodeImage now = take_code_image(whole);
  std::string what;
  auto add = [&](const char* part) { what += (what.empty() ? "" : ", ") + std::string(part); };
  if (now.timing_path != before.timing_path) add("bbreplay's timing path (its code)");
  if (whole && now.text != before.text) add("bbreplay's code");
  if (now.relro != before.relro) add("bbreplay's relocated read-only data (its GOT)");
  if (now.targets != before.targets) add("the entry of a function bbreplay imports, or its GOT entry");
  return what;
}

SyscallWatch syscall_watch() {
  return {status_field("Seccomp"), status_field("Seccomp_filters"), status_field("TracerPid")};
}

std::string syscall_changes(const SyscallWatch& before) {
  const SyscallWatch now = syscall_watch();
  std::string what;
  if (now.seccomp != before.seccomp || now.filters != before.filters)
    what += "a seccomp filter was installed (mode " + before.seccomp + " -> " + now.seccomp + ", filters " + before.filters +
            " -> " + now.filters + ": system calls, the clock's among them, can be intercepted)";
  if (now.tracer != before.tracer)
    what += std::string(what.empty() ? "" : "; ") + "a tracer attached (TracerPid " + now.tracer + ")";
  return what;
}

std::string userfaultfds() {
  std::string found;
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return "";
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char link[PATH_MAX];
    const std::string path = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t n = ::readlink(path.c_str(), link, sizeof link - 1);
    if (n > 0 && std::string(link, static_cast<size_t>(n)).find("userfaultfd") != std::string::npos)
      found += (found.empty() ? "fd " : ", ") + std::string(e->d_name);
  }
  ::closedir(d);
  return found;
}

std::string refuse_userfaultfd() {
#if defined(__x86_64__) || defined(__aarch64__)
#if defined(__x86_64__)
  constexpr uint32_t kArch = AUDIT_ARCH_X86_64;
#else
  constexpr uint32_t kArch = AUDIT_ARCH_AARCH64;
#endif
  constexpr uint32_t kIocNew = 0xAA00;  // USERFAULTFD_IOC_NEW, /dev/userfaultfd's
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_userfaultfd, 3, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ioctl, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[1])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kIocNew, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return std::string("PR_SET_NO_NEW_PRIVS: ") + std::strerror(errno);
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) return std::string("seccomp: ") + std::strerror(errno);
  return "";
#else
  return "no seccomp filter for this architecture";
#endif
}

DispatcherImage take_dispatcher_image() {
  DispatcherImage img;
  auto& d = c10::Dispatcher::singleton();
  const auto names = d.getAllOpNames();
  img.op_count = names.size();
  for (const auto& name : names) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto h = d.findOp(name);
    if (!h) continue;
    if (img.by_layout && !registrations(*h)) img.by_layout = false;
    img.ops.emplace_back(*h, 0);
  }
  for (auto& [h, count] : img.ops) count = registration_count(h, img.by_layout);
  // (each record's address checked by name once, here; after every case its count is read through it)
  if (img.by_layout)
    for (const auto& [h, count] : img.ops) img.counters.push_back(registrations(h));
  img.fallbacks = fallbacks();
  return img;
}

std::vector<std::string> dispatcher_changes(const DispatcherImage& before) {
  std::vector<std::string> out;
  for (size_t i = 0; i < before.ops.size(); ++i) {
    const auto& [h, count] = before.ops[i];
    const size_t now = before.by_layout ? *before.counters[i] : registration_count(h, false);
    if (now == count) continue;
    std::ostringstream s;
    s << h.operator_name();
    if (before.by_layout)
      s << " (" << (now > count ? now - count : count - now) << (now > count ? " more" : " fewer") << " registered)";
    out.push_back(s.str());
  }
  const std::vector<bool> now = fallbacks();
  for (size_t k = 0; k < now.size() && k < before.fallbacks.size(); ++k)
    if (now[k] && !before.fallbacks[k])
      out.push_back(std::string("a fallback for every op at dispatch key ") +
                    c10::toString(static_cast<c10::DispatchKey>(k)));
  return out;
}

}  // namespace bb::replay
