// libbbshim.so: the first stage of the preload. Plain C, no libtorch, no libstdc++: LD_PRELOAD puts it
// into every process (shells, compilers, DataLoader workers), and there it must do nothing.
//
// It watches dlopen() until libtorch_cpu is in the process, checks that the torch found there is the
// one the runtime (libbbshim_runtime.so, next to this file) was built against, then loads the runtime
// and hands over. A mismatch gives one stderr line and the preload stays inert.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim/boot_info.h"

#define BB_EXPORT __attribute__((visibility("default")))

enum { kWatching = 0, kActivating = 1, kDone = 2 };

static atomic_int g_state = kWatching;
typedef void* (*dlopen_fn)(const char*, int);
static _Atomic(dlopen_fn) g_real_dlopen;

static dlopen_fn real_dlopen(void) {
  dlopen_fn f = atomic_load_explicit(&g_real_dlopen, memory_order_acquire);
  if (!f) {
    f = (dlopen_fn)dlsym(RTLD_NEXT, "dlopen");
    atomic_store_explicit(&g_real_dlopen, f, memory_order_release);
  }
  return f;
}

static int log_level(void) {  // 0 off, 1 warn (default), 2 info, 3 debug: as in tracer/log.h
  const char* v = getenv("BB_LOG");
  if (!v || !*v) return 1;
  if (!strcmp(v, "off") || !strcmp(v, "0") || !strcmp(v, "quiet")) return 0;
  if (!strcmp(v, "info") || !strcmp(v, "2")) return 2;
  if (!strcmp(v, "debug") || !strcmp(v, "3")) return 3;
  return 1;
}

static void say(int level, const char* a, const char* b, const char* c, const char* d) {
  if (log_level() < level) return;
  char line[2048];
  int n = snprintf(line, sizeof line, "[bbshim] %s%s%s%s\n", a, b ? b : "", c ? c : "", d ? d : "");
  if (n <= 0) return;
  if ((size_t)n >= sizeof line) n = sizeof line - 1;
  ssize_t ignored = write(STDERR_FILENO, line, (size_t)n);
  (void)ignored;
}

static int is_disabled(void) {
  const char* v = getenv("BB_DISABLE");
  return v && *v && strcmp(v, "0") != 0;
}

// ------------------------------------------------------------------ finding torch

struct lib_search {
  const char* prefix;
  char path[PATH_MAX];
};

static int match_lib(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  struct lib_search* s = (struct lib_search*)data;
  const char* name = info->dlpi_name;
  if (!name || !*name) return 0;
  const char* base = strrchr(name, '/');
  base = base ? base + 1 : name;
  if (strncmp(base, s->prefix, strlen(s->prefix)) != 0) return 0;
  snprintf(s->path, sizeof s->path, "%s", name);
  return 1;
}

// Path of the loaded libtorch_cpu, or 0 when torch is not in the process.
static int find_torch(char* path, size_t size) {
  struct lib_search s = {"libtorch_cpu.so", {0}};
  if (!dl_iterate_phdr(match_lib, &s)) return 0;
  snprintf(path, size, "%s", s.path);
  return 1;
}

static void dirname_of(const char* path, char* out, size_t size) {
  snprintf(out, size, "%s", path);
  char* slash = strrchr(out, '/');
  if (slash) {
    *slash = 0;
  } else {
    snprintf(out, size, ".");
  }
}

// Reads torch/version.py next to torch/lib/ and extracts __version__ = '...'.
static int torch_version_near(const char* lib_path, char* out, size_t size) {
  char dir[PATH_MAX], file[PATH_MAX + 32], line[512];
  dirname_of(lib_path, dir, sizeof dir);
  snprintf(file, sizeof file, "%s/../version.py", dir);
  FILE* f = fopen(file, "re");
  if (!f) return 0;
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) {
    if (strncmp(line, "__version__", 11) != 0) continue;
    char* q = strpbrk(line, "'\"");
    if (!q) continue;
    char* end = strchr(q + 1, *q);
    if (!end) continue;
    *end = 0;
    snprintf(out, size, "%s", q + 1);
    found = 1;
  }
  fclose(f);
  return found;
}

// The version the runtime was built for: first line of libbbshim_runtime.torch.
static int expected_version(const char* dir, char* out, size_t size) {
  char file[PATH_MAX + 32];
  snprintf(file, sizeof file, "%s/libbbshim_runtime.torch", dir);
  FILE* f = fopen(file, "re");
  if (!f) return 0;
  int ok = fgets(out, (int)size, f) != NULL;
  fclose(f);
  if (ok) out[strcspn(out, "\r\n")] = 0;
  return ok && *out;
}

// ------------------------------------------------------------------ handing over

static void activate(void) {
  char torch_lib[PATH_MAX], own_dir[PATH_MAX], want[256], have[256], runtime[PATH_MAX + 32];
  Dl_info self;
  if (!find_torch(torch_lib, sizeof torch_lib)) return;
  if (!dladdr((void*)&activate, &self) || !self.dli_fname) {
    say(1, "cannot locate libbbshim.so itself; staying inactive", NULL, NULL, NULL);
    return;
  }
  dirname_of(self.dli_fname, own_dir, sizeof own_dir);
  if (!expected_version(own_dir, want, sizeof want)) {
    say(1, "missing ", own_dir, "/libbbshim_runtime.torch (incomplete build?); staying inactive", NULL);
    return;
  }
  if (!torch_version_near(torch_lib, have, sizeof have)) snprintf(have, sizeof have, "unknown");
  if (strcmp(want, have) != 0) {
    char msg[PATH_MAX + 1024];
    snprintf(msg, sizeof msg, "built for torch %s but this program loaded torch %s (%s); ", want, have, torch_lib);
    say(1, msg, "bbshim stays inactive. Rebuild bbshim with this torch.", NULL, NULL);
    return;
  }
  snprintf(runtime, sizeof runtime, "%s/libbbshim_runtime.so", own_dir);
  void* h = real_dlopen()(runtime, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    say(1, "cannot load the runtime: ", dlerror(), "; staying inactive", NULL);
    return;
  }
  bb_runtime_start_fn start = (bb_runtime_start_fn)dlsym(h, "bbshim_runtime_start");
  if (!start) {
    say(1, "runtime has no bbshim_runtime_start; staying inactive", NULL, NULL, NULL);
    return;
  }
  struct bb_boot_info info = {BB_BOOT_ABI, have, torch_lib, own_dir};
  if (start(&info) != 0) say(2, "runtime declined to start", NULL, NULL, NULL);
}

static void maybe_activate(void) {
  char path[PATH_MAX];
  if (!find_torch(path, sizeof path)) return;
  int expected = kWatching;
  if (!atomic_compare_exchange_strong(&g_state, &expected, kActivating)) return;
  activate();
  atomic_store(&g_state, kDone);
}

// Loads by path are observed: Python imports torch/_C.so by its full path, and libtorch comes in with
// it. Loads by bare name (and paths with $ORIGIN-style tokens) go straight on as a tail call, so
// glibc still sees the real caller and searches that caller's RUNPATH.
BB_EXPORT void* dlopen(const char* file, int mode) {
  if (__builtin_expect(atomic_load_explicit(&g_state, memory_order_relaxed) == kWatching, 0) && file &&
      strchr(file, '/') && !strchr(file, '$')) {
    void* handle = real_dlopen()(file, mode);
    if (handle) maybe_activate();
    return handle;
  }
  return real_dlopen()(file, mode);
}

// ------------------------------------------------------------------ other CUPTI clients
//
// CUPTI serves one activity client per process. When torch.profiler (kineto) or another tool
// registers its buffer callbacks, switches CUPTI's timestamps, finalizes CUPTI, or subscribes to its
// callbacks (which matters when the runtime holds the one subscriber slot), the runtime's
// device timing must hear of it first: it collects its own records and stops, instead of reporting
// times from a clock it no longer knows. These wrappers tell it, then forward the call unchanged.
// The runtime's own CUPTI calls go to libcupti's handle directly and never come through here.

enum { kCuptiCallbacks = 1, kCuptiTimestamps = 2, kCuptiFinalize = 4, kCuptiSubscribe = 8 };
typedef void (*bb_cupti_listener)(int what);
static _Atomic(bb_cupti_listener) g_cupti_listener;
static atomic_int g_cupti_seen;  // what other clients did so far (a kCupti* mask)

BB_EXPORT void bbshim_cupti_listen(bb_cupti_listener listener) { atomic_store(&g_cupti_listener, listener); }
BB_EXPORT int bbshim_cupti_seen(void) { return atomic_load(&g_cupti_seen); }

static int match_cupti(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  const char* name = info->dlpi_name;
  if (!name || !*name) return 0;
  const char* base = strrchr(name, '/');
  base = base ? base + 1 : name;
  if (strncmp(base, "libcupti.so", 11) != 0) return 0;
  snprintf((char*)data, PATH_MAX, "%s", name);
  return 1;
}

// The real function, as the caller would have bound it without us: looked up from the caller's own
// object (dlsym on its handle searches it and its dependencies, where its libcupti is, even when
// that was loaded with RTLD_LOCAL); else the next definition in the global scope; else the loaded
// libcupti. `self` is our wrapper, never an answer.
static void* real_cupti(const char* name, const void* caller, const void* self) {
  Dl_info info;
  if (caller && dladdr(caller, &info) && info.dli_fname && *info.dli_fname) {
    void* h = real_dlopen()(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    if (h) {
      void* f = dlsym(h, name);
      dlclose(h);
      if (f && f != self) return f;
    }
  }
  void* f = dlsym(RTLD_NEXT, name);
  if (f && f != self) return f;
  char path[PATH_MAX] = {0};
  if (!dl_iterate_phdr(match_cupti, path)) return NULL;
  void* h = real_dlopen()(path, RTLD_NOW | RTLD_NOLOAD);
  f = h ? dlsym(h, name) : NULL;
  return f != self ? f : NULL;
}

#define BB_CALLER __builtin_extract_return_addr(__builtin_return_address(0))

static void cupti_event(int what) {
  atomic_fetch_or(&g_cupti_seen, what);
  bb_cupti_listener l = atomic_load(&g_cupti_listener);
  if (l) l(what);
}

enum { kCuptiNotInitialized = 15 };  // CUPTI_ERROR_NOT_INITIALIZED

BB_EXPORT int cuptiActivityRegisterCallbacks(void* request, void* complete) {
  cupti_event(kCuptiCallbacks);
  int (*f)(void*, void*) = (int (*)(void*, void*))real_cupti("cuptiActivityRegisterCallbacks", BB_CALLER,
                                                             (void*)&cuptiActivityRegisterCallbacks);
  return f ? f(request, complete) : kCuptiNotInitialized;
}

BB_EXPORT int cuptiActivityRegisterTimestampCallback(void* callback) {
  cupti_event(kCuptiTimestamps);
  int (*f)(void*) = (int (*)(void*))real_cupti("cuptiActivityRegisterTimestampCallback", BB_CALLER,
                                               (void*)&cuptiActivityRegisterTimestampCallback);
  return f ? f(callback) : kCuptiNotInitialized;
}

BB_EXPORT int cuptiSubscribe(void* subscriber, void* callback, void* userdata) {
  cupti_event(kCuptiSubscribe);
  int (*f)(void*, void*, void*) =
      (int (*)(void*, void*, void*))real_cupti("cuptiSubscribe", BB_CALLER, (void*)&cuptiSubscribe);
  return f ? f(subscriber, callback, userdata) : kCuptiNotInitialized;
}

BB_EXPORT int cuptiSubscribe_v2(void* subscriber, void* callback, void* userdata, void* params) {
  cupti_event(kCuptiSubscribe);
  int (*f)(void*, void*, void*, void*) =
      (int (*)(void*, void*, void*, void*))real_cupti("cuptiSubscribe_v2", BB_CALLER, (void*)&cuptiSubscribe_v2);
  return f ? f(subscriber, callback, userdata, params) : kCuptiNotInitialized;
}

BB_EXPORT int cuptiFinalize(void) {
  cupti_event(kCuptiFinalize);
  int (*f)(void) = (int (*)(void))real_cupti("cuptiFinalize", BB_CALLER, (void*)&cuptiFinalize);
  return f ? f() : kCuptiNotInitialized;
}

__attribute__((constructor)) static void bb_bootstrap_init(void) {
  if (is_disabled()) {
    atomic_store(&g_state, kDone);
    return;
  }
  real_dlopen();
  // torch linked into the executable: its constructors may not have run yet, so hand over at the
  // next dlopen instead of now (state stays kWatching).
}
