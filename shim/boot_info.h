/* What the first stage (bootstrap.c) hands to the runtime. Shared by C and C++. */
#ifndef BBSHIM_BOOT_INFO_H
#define BBSHIM_BOOT_INFO_H

#define BB_BOOT_ABI 1

#ifdef __cplusplus
extern "C" {
#endif

struct bb_boot_info {
  int abi;                   /* BB_BOOT_ABI */
  const char* torch_version; /* torch.__version__ of the process */
  const char* torch_lib;     /* path of the loaded libtorch_cpu.so */
  const char* lib_dir;       /* folder holding libbbshim.so and the runtime */
};

/* Returns 0 when the runtime started. */
typedef int (*bb_runtime_start_fn)(const struct bb_boot_info* info);

#ifdef __cplusplus
}
#endif
#endif
