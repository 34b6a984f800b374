/* bb_test_dlopen_runpath LOADER.so: loads the loader by path, which loads its target by name. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  void* loader = dlopen(argv[1], RTLD_NOW);
  if (!loader) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  int (*load)(void) = (int (*)(void))dlsym(loader, "bb_test_load_target");
  if (!load || load() != 0) return 1;
  printf("target loaded\n");
  return 0;
}
