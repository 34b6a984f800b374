# Locates the torch that a Python interpreter imports and defines imported targets for it.
#
#   bb::torch       c10 + torch_cpu, headers, the ABI flag torch was built with, and NDEBUG
#   bb::c10_cuda    c10_cuda (only when BB_TORCH_CUDA is true)
#
# Sets BB_TORCH_VERSION (e.g. 2.11.0+cu130), BB_TORCH_LIB_DIR, BB_TORCH_CUDA (the CUDA version torch was
# built with, empty for a CPU build), BB_PROCESS_LIBSTDCXX (the libstdc++.so.6 that a Python process
# importing torch has loaded; empty where none was found).
#
# find_package(Torch) is deliberately not used: for a CUDA build of torch it insists on a CUDA toolkit even
# though the tracer needs none, and it links every CUDA library into whatever uses it.

# Development.Module (Python's headers) only for the Python kernel bridge (backends/python), built when found.
find_package(Python3 COMPONENTS Interpreter REQUIRED OPTIONAL_COMPONENTS Development.Module)

set(_bb_probe [=[
import os, torch
root = os.path.dirname(torch.__file__)
print("version=" + torch.__version__)
print("root=" + root)
print("cuda=" + (torch.version.cuda or ""))
print("cxx11abi=" + str(int(torch._C._GLIBCXX_USE_CXX11_ABI)))
with open("/proc/self/maps") as maps:  # the C++ runtime a torch process runs with
    paths = [line.split()[-1] for line in maps if "/libstdc++.so" in line]
print("libstdcxx=" + (paths[0] if paths else ""))
]=])
execute_process(
  COMMAND "${Python3_EXECUTABLE}" -c "${_bb_probe}"
  OUTPUT_VARIABLE _bb_out ERROR_VARIABLE _bb_err RESULT_VARIABLE _bb_rc)
if(NOT _bb_rc EQUAL 0)
  message(FATAL_ERROR "bbshim: '${Python3_EXECUTABLE}' cannot import torch:\n${_bb_err}\n"
                      "Install torch (pip install torch==2.11.0) or point -DPython3_EXECUTABLE at a Python that has it.")
endif()
string(REGEX MATCH "version=([^\n]*)" _ "${_bb_out}")
set(BB_TORCH_VERSION "${CMAKE_MATCH_1}")
string(REGEX MATCH "root=([^\n]*)" _ "${_bb_out}")
set(_bb_root "${CMAKE_MATCH_1}")
string(REGEX MATCH "cuda=([^\n]*)" _ "${_bb_out}")
set(BB_TORCH_CUDA "${CMAKE_MATCH_1}")
string(REGEX MATCH "cxx11abi=([01])" _ "${_bb_out}")
set(_bb_abi "${CMAKE_MATCH_1}")
set(BB_TORCH_LIB_DIR "${_bb_root}/lib")
string(REGEX MATCH "libstdcxx=([^\n]*)" _ "${_bb_out}")
set(BB_PROCESS_LIBSTDCXX "${CMAKE_MATCH_1}")

find_library(BB_C10_LIB c10 PATHS "${BB_TORCH_LIB_DIR}" NO_DEFAULT_PATH REQUIRED)
find_library(BB_TORCH_CPU_LIB torch_cpu PATHS "${BB_TORCH_LIB_DIR}" NO_DEFAULT_PATH REQUIRED)

add_library(bb::torch INTERFACE IMPORTED)
set_target_properties(bb::torch PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${_bb_root}/include"
  INTERFACE_LINK_LIBRARIES "${BB_TORCH_CPU_LIB};${BB_C10_LIB}"
  # NDEBUG is not optional: RecordFunction's layout differs without it and every op would assert.
  INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=${_bb_abi};NDEBUG")

find_library(BB_TORCH_PYTHON_LIB torch_python PATHS "${BB_TORCH_LIB_DIR}" NO_DEFAULT_PATH)

if(BB_TORCH_CUDA)
  find_library(BB_C10_CUDA_LIB c10_cuda PATHS "${BB_TORCH_LIB_DIR}" NO_DEFAULT_PATH)
  if(BB_C10_CUDA_LIB)
    add_library(bb::c10_cuda INTERFACE IMPORTED)
    set_target_properties(bb::c10_cuda PROPERTIES INTERFACE_LINK_LIBRARIES "${BB_C10_CUDA_LIB}")
  endif()
endif()
message(STATUS "bbshim: torch ${BB_TORCH_VERSION} at ${_bb_root} (CUDA: ${BB_TORCH_CUDA})")
