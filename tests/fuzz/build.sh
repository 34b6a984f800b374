#!/usr/bin/env bash
# ctest's fuzz.build: configures and builds the clang build of the fuzz targets (BB_FUZZ=ON) next to
# the normal one. Arguments: cmake source-dir build-dir generator clang clang++ python [launcher]
set -euo pipefail
cmake=$1 src=$2 dir=$3 gen=$4 cc=$5 cxx=$6 py=$7 launcher=${8:-}
args=(-S "$src" -B "$dir" -G "$gen" -DBB_FUZZ=ON -DBB_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
      -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DPython3_EXECUTABLE="$py")
[ -n "$launcher" ] && args+=(-DCMAKE_C_COMPILER_LAUNCHER="$launcher" -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher")
"$cmake" "${args[@]}" >/dev/null
"$cmake" --build "$dir" -j"$(nproc)"
