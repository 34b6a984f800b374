// Cheat: lazy_uffd done properly. Computes nothing in the call; its results are anonymous memory
// registered with a userfaultfd whose handler thread serves them:
// - the userfaultfd lives only in that thread's own descriptor table (unshare(CLONE_FILES) first), so
//   /proc/self/fd (the main thread's table, which bbreplay's worker lists) never shows it;
// - bbreplay's touch inside the clock (the calling thread, two bytes a page, first page to last) gets
//   the zero page over all but the last page in one ioctl; its fault on the last page ends the touch:
//   the zeros are dropped (missing again) and the last page gets its real values. The clock stops after
//   two faults and no work;
// - every later read, the worker's own and the reference's process_vm_readv from outside (which waits
//   on a userfaultfd like any access), gets its page's real values, computed then, so every read agrees;
// - once every page has been served the handler drops them all again, so that the "dry" runs bbreplay
//   times to calibrate its outside clocks pay the same page faults as its timed runs do after the clock;
// - it spins (no sleep) for 2 ms after each fault, so that faults are served fast.
// Falls back to an honest loop where userfaultfd is refused (under namespaces on a host with
// vm.unprivileged_userfaultfd=0). Expected by bbreplay's design: caught by the reference's reads or its
// outside clocks, no speedup. Found (2026-12-04, --isolation subreaper, as root): passes unflagged,
// timed at 0.5-1.5 ms on relu(2M) where its honest loop takes 9-12 ms (credited 2-7x over native).
#include <ATen/ATen.h>
#include <bb/kernel.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

namespace {

constexpr size_t kPage = 4096;
using Clock = std::chrono::steady_clock;

struct Region {
  uintptr_t base;
  size_t pages, left;
  at::Tensor in;
  std::vector<char> real;
  bool fresh = true;
};

struct Handler {
  std::mutex mu;
  std::condition_variable cv;
  std::list<std::shared_ptr<Region>> regions;
  std::shared_ptr<Region> pending;  // (to register: only the handler's table has the descriptor)
  int fd = -2;
  pid_t caller = 0;
};

Handler* g = nullptr;

void relu_into(const float* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = in[i] > 0 || in[i] != in[i] ? in[i] : 0.0f;
}

void fault(Region& r, size_t k, pid_t tid, int fd) {
  if (r.fresh && k == 0 && tid == g->caller && r.pages > 2) {  // the touch begins
    uffdio_zeropage z{{r.base, (r.pages - 1) * kPage}, 0, 0};
    ioctl(fd, UFFDIO_ZEROPAGE, &z);
    r.fresh = false;
    return;
  }
  if (!r.fresh && k == r.pages - 1 && r.left == r.pages) madvise(reinterpret_cast<void*>(r.base), (r.pages - 1) * kPage, MADV_DONTNEED);
  r.fresh = false;
  alignas(kPage) static float page[kPage / 4];
  const size_t n = static_cast<size_t>(r.in.numel()), from = std::min(n, k * (kPage / 4));
  relu_into(r.in.const_data_ptr<float>() + from, page, std::min(kPage / 4, n - from));
  uffdio_copy c{r.base + k * kPage, reinterpret_cast<uintptr_t>(page), kPage, 0, 0};
  if (ioctl(fd, UFFDIO_COPY, &c) == 0 && !r.real[k]) r.real[k] = 1, --r.left;
  if (r.left == 0) {  // all served: missing again, for whoever reads next (the dry run among them)
    madvise(reinterpret_cast<void*>(r.base), r.pages * kPage, MADV_DONTNEED);
    r.real.assign(r.pages, 0), r.left = r.pages;
  }
}

void serve() {
  int fd = -1;
  if (unshare(CLONE_FILES) == 0) fd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
  uffdio_api api{UFFD_API, UFFD_FEATURE_THREAD_ID, 0};
  if (fd >= 0 && ioctl(fd, UFFDIO_API, &api) != 0) close(fd), fd = -1;
  { std::lock_guard<std::mutex> l(g->mu); g->fd = fd; }
  g->cv.notify_all();
  for (auto busy = Clock::now(); fd >= 0;) {
    {
      std::unique_lock<std::mutex> l(g->mu);
      if (g->pending) {
        uffdio_register reg{{g->pending->base, g->pending->pages * kPage}, UFFDIO_REGISTER_MODE_MISSING, 0};
        if (ioctl(fd, UFFDIO_REGISTER, &reg) == 0) g->regions.push_back(g->pending);
        g->pending = nullptr;
        g->cv.notify_all();
      }
      uffd_msg m{};
      if (read(fd, &m, sizeof m) == sizeof m && m.event == UFFD_EVENT_PAGEFAULT) {
        for (auto& r : g->regions)
          if (m.arg.pagefault.address >= r->base && m.arg.pagefault.address < r->base + r->pages * kPage)
            fault(*r, (m.arg.pagefault.address - r->base) / kPage, static_cast<pid_t>(m.arg.pagefault.feat.ptid), fd);
        busy = Clock::now();
        continue;
      }
    }
    if (Clock::now() - busy > std::chrono::milliseconds(2)) {
      pollfd p{fd, POLLIN, 0};
      poll(&p, 1, 1);
    }
  }
}

}  // namespace

at::Tensor lazy_uffd_hidden_relu(const at::Tensor& x) {
  if (x.scalar_type() != at::kFloat || !x.is_cpu() || !x.is_contiguous()) throw bb::Decline("contiguous float32 only");
  if (!g) {
    g = new Handler;
    g->caller = static_cast<pid_t>(syscall(SYS_gettid));
    std::thread(serve).detach();
    std::unique_lock<std::mutex> l(g->mu);
    g->cv.wait(l, [] { return g->fd != -2; });
  }
  const size_t n = static_cast<size_t>(x.numel()), pages = std::max<size_t>(1, (n * 4 + kPage - 1) / kPage);
  void* p = g->fd < 0 ? MAP_FAILED : mmap(nullptr, pages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  auto r = std::make_shared<Region>(Region{reinterpret_cast<uintptr_t>(p), pages, pages, x, std::vector<char>(pages, 0)});
  if (p != MAP_FAILED) {
    std::unique_lock<std::mutex> l(g->mu);
    g->pending = r;
    g->cv.wait(l, [] { return !g->pending; });
    if (g->regions.empty() || g->regions.back() != r) munmap(p, pages * kPage), p = MAP_FAILED;
  }
  if (p == MAP_FAILED) {  // no userfaultfd here: honest
    at::Tensor out = at::empty(x.sizes(), x.options());
    relu_into(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), n);
    return out;
  }
  return at::from_blob(p, x.sizes(), [r, pages](void* q) {
    std::lock_guard<std::mutex> l(g->mu);
    g->regions.remove(r);
    munmap(q, pages * kPage);
  }, x.options());
}

BB_KERNEL("aten::relu", lazy_uffd_hidden_relu);
