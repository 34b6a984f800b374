/* Built with RUNPATH $ORIGIN/sub: dlopen by bare name must search it (glibc uses the caller's). */
#include <dlfcn.h>
#include <stdio.h>

__attribute__((visibility("default"))) int bb_test_load_target(void) {
  void* h = dlopen("libbb_test_target.so", RTLD_NOW);
  if (!h) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  return 0;
}
