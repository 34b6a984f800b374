// Cheat: computes nothing in the call. Its result is fresh anonymous memory registered with a
// userfaultfd (missing pages), served by a handler thread that tells bbreplay's reads apart:
// - the first fault of a call on the result's first page is bbreplay's touch inside the clock (two
//   bytes a page, first page to last): the handler maps the zero page over every page but the last at
//   once (one ioctl), so the touch runs on without faulting; when it faults on the last page the touch is
//   over: the handler drops the zero pages again (MADV_DONTNEED: missing once more) and fills the last
//   page with its real values. The clock stops after two faults and no work;
// - every later fault (the worker's own reads of its results, and the reference's process_vm_readv from
//   outside, which waits on a userfaultfd like any access) gets the page's real values, computed then.
// When every page holds its real values the handler closes the userfaultfd (none held at the case's
// end). Falls back to UFFD_USER_MODE_ONLY where a full userfaultfd is refused (then the reference's
// reads fail), and to an honest loop where userfaultfd is refused altogether.
// Expected: escaping-work under namespaces (user-mode-only there: the reference's reads fail, and the
// userfaultfd is still held at the case's end). Under the subreaper as root only the wall clock can
// see it (the ~16 page faults of the worker's own reads right after the clock, which its reply waits
// for): found (2026-12-04) to pass unflagged in 8 of 8 runs once that check compared paired dry runs.
#include <ATen/ATen.h>
#include <bb/kernel.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

namespace {

constexpr size_t kPage = 4096;

struct Lazy {
  int fd;
  char* base;
  size_t pages;
  at::Tensor in;  // (kept alive until every page is served)
  std::vector<char> real;
  size_t left;
  std::atomic<bool> dropped{false};
};

void relu_into(const float* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = in[i] > 0 || in[i] != in[i] ? in[i] : 0.0f;
}

void serve(std::shared_ptr<Lazy> l) {
  const float* in = l->in.const_data_ptr<float>();
  const size_t n = static_cast<size_t>(l->in.numel());
  bool first = true;
  alignas(kPage) static thread_local float page[kPage / 4];
  while (l->left > 0 && !l->dropped) {
    pollfd p{l->fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    uffd_msg m{};
    if (read(l->fd, &m, sizeof m) != sizeof m || m.event != UFFD_EVENT_PAGEFAULT) continue;
    const size_t k = (m.arg.pagefault.address - reinterpret_cast<uintptr_t>(l->base)) / kPage;
    if (first && k == 0 && l->pages > 2) {  // the touch begins: zeros everywhere but the last page
      uffdio_zeropage z{{reinterpret_cast<uintptr_t>(l->base), (l->pages - 1) * kPage}, 0, 0};
      ioctl(l->fd, UFFDIO_ZEROPAGE, &z);
      first = false;
      continue;
    }
    if (!first && k == l->pages - 1 && !l->real[k]) madvise(l->base, (l->pages - 1) * kPage, MADV_DONTNEED);
    first = false;
    const size_t from = k * (kPage / 4), count = std::min(kPage / 4, n - std::min(n, from));
    relu_into(in + from, page, count);
    uffdio_copy c{reinterpret_cast<uintptr_t>(l->base + k * kPage), reinterpret_cast<uintptr_t>(page), kPage, 0, 0};
    if (ioctl(l->fd, UFFDIO_COPY, &c) == 0 && !l->real[k]) l->real[k] = 1, --l->left;
  }
  close(l->fd);  // (every page real: no userfaultfd held any more)
  l->in = at::Tensor();
}

int open_userfaultfd() {
  for (int flags : {O_CLOEXEC, O_CLOEXEC | UFFD_USER_MODE_ONLY}) {
    const int fd = static_cast<int>(syscall(SYS_userfaultfd, flags));
    uffdio_api api{UFFD_API, 0, 0};
    if (fd >= 0 && ioctl(fd, UFFDIO_API, &api) == 0) return fd;
    if (fd >= 0) close(fd);
  }
  return -1;
}

}  // namespace

at::Tensor lazy_uffd_relu(const at::Tensor& x) {
  if (x.scalar_type() != at::kFloat || !x.is_cpu() || !x.is_contiguous()) throw bb::Decline("contiguous float32 only");
  const size_t n = static_cast<size_t>(x.numel()), pages = std::max<size_t>(1, (n * 4 + kPage - 1) / kPage);
  const int fd = open_userfaultfd();
  void* p = fd < 0 ? MAP_FAILED : mmap(nullptr, pages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  uffdio_register reg{{reinterpret_cast<uintptr_t>(p), pages * kPage}, UFFDIO_REGISTER_MODE_MISSING, 0};
  if (p == MAP_FAILED || ioctl(fd, UFFDIO_REGISTER, &reg) != 0) {  // no userfaultfd here: honest
    if (fd >= 0) close(fd);
    if (p != MAP_FAILED) munmap(p, pages * kPage);
    at::Tensor out = at::empty(x.sizes(), x.options());
    relu_into(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), n);
    return out;
  }
  auto l = std::make_shared<Lazy>();
  l->fd = fd, l->base = static_cast<char*>(p), l->pages = pages, l->in = x, l->real.assign(pages, 0), l->left = pages;
  std::thread(serve, l).detach();
  return at::from_blob(p, x.sizes(), [l, pages](void* q) { l->dropped = true; munmap(q, pages * kPage); }, x.options());
}

BB_KERNEL("aten::relu", lazy_uffd_relu);
