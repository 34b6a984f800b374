/* Loads the client library RTLD_LOCAL (as Python loads torch's extension), makes each CUPTI call
   through it, and prints what answered, then what the preload saw (if it is there). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    printf("cannot load: %s\n", dlerror());
    return 1;
  }
  int (*calls)(int) = (int (*)(int))dlsym(h, "client_calls");
  for (int k = 0; k < 5; ++k) printf("%d ", calls(k));
  int (*seen)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "bbshim_cupti_seen");
  printf("seen %d\n", seen ? seen() : -1);
  return 0;
}
