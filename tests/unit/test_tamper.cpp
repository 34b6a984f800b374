// What a kernel could change in its own process to fool the measurement taken there (replay/workers/tamper.h):
// each change is seen, and nothing is seen when nothing changed.
#include <ATen/ATen.h>
#include <elf.h>
#include <link.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <torch/library.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <fcntl.h>

#include "catch.h"
#include "replay/workers/remote_kernel.h"
#include "replay/workers/tamper.h"

using namespace bb::replay;

namespace {

// The relocated read-only part (GNU_RELRO) of the object holding this test: where its GOT is.
int find_relro(struct dl_phdr_info* info, size_t, void* data) {
  const auto self = reinterpret_cast<uintptr_t>(&find_relro);
  bool mine = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& p = info->dlpi_phdr[i];
    if (p.p_type == PT_LOAD && self >= info->dlpi_addr + p.p_vaddr && self < info->dlpi_addr + p.p_vaddr + p.p_memsz)
      mine = true;
  }
  if (!mine) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_GNU_RELRO) {
      auto* out = static_cast<std::pair<uintptr_t, size_t>*>(data);
      *out = {info->dlpi_addr + info->dlpi_phdr[i].p_vaddr, info->dlpi_phdr[i].p_memsz};
      return 1;
    }
  return 0;
}

at::Tensor slow_relu(const at::Tensor& x) { return at::clamp_min(x, 0); }

}  // namespace

TEST_CASE("the raw clock runs with the system's monotonic clock") {
  const uint64_t a = raw_monotonic_ns();
  const auto s0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - s0 < std::chrono::milliseconds(20)) {
  }
  const double ms = static_cast<double>(raw_monotonic_ns() - a) / 1e6;
  CHECK(ms >= 19.0);
  CHECK(ms < 2000.0);
}

TEST_CASE("bbreplay's GOT written over is seen, and nothing is seen when nothing changed") {
  const CodeImage before = take_code_image();
  REQUIRE(before.error.empty());
  CHECK(code_changes(before, true).empty());
  std::pair<uintptr_t, size_t> relro{0, 0};
  if (!dl_iterate_phdr(find_relro, &relro) || relro.second < 8) {
    WARN("this test binary has no RELRO segment: not checked");
    return;
  }
  const uintptr_t page = relro.first & ~uintptr_t{4095};
  const size_t len = relro.first + relro.second - page;
  REQUIRE(::mprotect(reinterpret_cast<void*>(page), len, PROT_READ | PROT_WRITE) == 0);
  auto* slot = reinterpret_cast<unsigned char*>(relro.first + relro.second - 8);  // (the GOT ends the segment)
  const unsigned char was = *slot;
  *slot = static_cast<unsigned char>(was ^ 0x5a);
  const std::string what = code_changes(before, true);
  *slot = was;
  ::mprotect(reinterpret_cast<void*>(page), len, PROT_READ);
  CHECK(what.find("GOT") != std::string::npos);
  CHECK(code_changes(before, true).empty());
}

extern "C" {
extern const char __start_bb_timing_path[] __attribute__((weak, visibility("hidden")));
extern const char __stop_bb_timing_path[] __attribute__((weak, visibility("hidden")));
}

TEST_CASE("a byte of the timing path's code changed is seen after every case, not only every 32nd") {
  REQUIRE(__start_bb_timing_path);  // (the section exists: raw_monotonic_ns, call, touch are in it)
  REQUIRE(__stop_bb_timing_path - __start_bb_timing_path > 64);
  const CodeImage before = take_code_image(true);
  CHECK(code_changes(before, false).empty());
  auto* byte = const_cast<char*>(__start_bb_timing_path) + 7;
  const uintptr_t page = reinterpret_cast<uintptr_t>(byte) & ~uintptr_t{4095};
  REQUIRE(::mprotect(reinterpret_cast<void*>(page), 8192, PROT_READ | PROT_WRITE | PROT_EXEC) == 0);
  const char was = *byte;
  *byte = static_cast<char>(was ^ 0x01);
  const std::string quick = code_changes(before, false), whole = code_changes(before, true);
  *byte = was;
  ::mprotect(reinterpret_cast<void*>(page), 8192, PROT_READ | PROT_EXEC);
  CHECK(quick.find("timing path") != std::string::npos);
  CHECK(whole.find("bbreplay's code") != std::string::npos);
  CHECK(code_changes(before, true).empty());
}

TEST_CASE("a seccomp filter installed, and a userfaultfd held, are seen") {
  const SyscallWatch before = syscall_watch();
  CHECK(syscall_changes(before).empty());
  const pid_t child = ::fork();
  if (child == 0) {  // (a filter cannot be removed: installed in a child)
    sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
    sock_fprog prog{1, allow};
    ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) ::_exit(2);
    ::_exit(syscall_changes(before).find("seccomp") != std::string::npos ? 0 : 1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 2) WARN("seccomp filters are refused here: not checked");
  else
    CHECK(WEXITSTATUS(status) == 0);
  CHECK(userfaultfds().empty());
  const long fd = ::syscall(SYS_userfaultfd, O_CLOEXEC);
  if (fd < 0) {
    WARN("userfaultfd is refused here: not checked");
    return;
  }
  CHECK_FALSE(userfaultfds().empty());
  ::close(static_cast<int>(fd));
  CHECK(userfaultfds().empty());
}

TEST_CASE("a process refused userfaultfd gets none, by the system call or /dev/userfaultfd") {
  const pid_t child = ::fork();
  if (child == 0) {  // (the filter stays: installed in a child)
    if (!refuse_userfaultfd().empty()) ::_exit(2);
    errno = 0;
    if (::syscall(SYS_userfaultfd, O_CLOEXEC) >= 0 || errno != EPERM) ::_exit(3);
    const int dev = ::open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
    if (dev >= 0 && ::ioctl(dev, 0xAA00 /* USERFAULTFD_IOC_NEW */, O_CLOEXEC) >= 0) ::_exit(4);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 2) WARN("seccomp filters are refused here: not checked");
  else
    CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("result pages dropped after they were touched are named, present ones are not") {
  const size_t page = 4096;
  auto* p = static_cast<char*>(::mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(p != MAP_FAILED);
  std::memset(p, 1, 4 * page);
  const auto at = reinterpret_cast<uint64_t>(p);
  CHECK(absent_pages(::getpid(), bb::replay::wire::json::array({bb::replay::wire::json::array({at, 4 * page})})).empty());
  REQUIRE(::madvise(p + 2 * page, page, MADV_DONTNEED) == 0);  // (missing again: read, it would be refilled)
  const std::string why = absent_pages(::getpid(), bb::replay::wire::json::array({bb::replay::wire::json::array({at + 100, 4 * page - 200})}));
  std::ostringstream hex;
  hex << std::hex << at + 2 * page;
  CHECK(why.find(hex.str()) != std::string::npos);
  CHECK(absent_pages(::getpid(), bb::replay::wire::json::array({bb::replay::wire::json::array({at, 2 * page})})).empty());  // (pages 0 and 1)
  ::munmap(p, 4 * page);
}

TEST_CASE("a kernel registered over one of ATen's own is named, and its removal is seen too") {
  const DispatcherImage before = take_dispatcher_image();
  CHECK(before.by_layout);  // (the dispatcher's own record was found: counts, not hashes of its dump)
  CHECK(before.ops.size() > 1000);
  CHECK(dispatcher_changes(before).empty());
  {
    torch::Library lib(torch::Library::IMPL, "aten", c10::DispatchKey::CPU, __FILE__, __LINE__);
    lib.impl("relu", slow_relu);
    const std::vector<std::string> changes = dispatcher_changes(before);
    REQUIRE(changes.size() == 1);
    CHECK(changes[0].find("aten::relu") != std::string::npos);
  }
  CHECK(dispatcher_changes(before).empty());  // (the registration ended with its library)
}
