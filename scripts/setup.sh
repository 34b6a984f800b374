# Shared by scripts/test, scripts/demo and scripts/gpu-check (source it, do not run it).
# Installs what is missing on a Debian/Ubuntu machine, chooses the Python whose torch the build is
# for, and builds. Settings (all optional):
#   BB_PYTHON=path       use this Python (it must have torch); nothing is installed into it
#   BB_NO_INSTALL=1      install nothing (machines without package access); fail if something is missing
#   BB_BUILD_DIR=dir     build folder (default: build)
#   BB_CMAKE_ARGS="..."  extra CMake arguments, e.g. -DCMAKE_PREFIX_PATH=...
set -euo pipefail

BB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BB_BUILD_DIR=${BB_BUILD_DIR:-$BB_ROOT/build}
BB_TORCH_PIN="torch==2.11.0"
# clang-14 and libclang-rt-14-dev: libFuzzer and the sanitizers for ctest's fuzz.* tests (tests/fuzz).
# python3-dev: Python's headers, for the Python kernel bridge (backends/python; built only when found).
BB_RAY_PIN="ray==2.60.0"  # wheels for Python 3.11 and 3.12 (about 80 MB with its dependencies)
BB_LIGER_PIN="liger-kernel==0.8.5"  # pure Python over Triton (torch's own dependency): installed --no-deps
BB_APT_PACKAGES=(cmake ninja-build g++ libyaml-cpp-dev libboost-dev libboost-stacktrace-dev catch2 libcli11-dev
                 nlohmann-json3-dev clang-14 libclang-rt-14-dev python3-dev)
BB_TEST_APT_PACKAGES=(chromium)    # the tests open bbcompare's pages in a headless browser
BB_PLOTLY_PIN="plotly==6.5.0"      # bbcompare --html draws its plots with plotly's bundled plotly.js

bb_say() { echo "[bbshim setup] $*" >&2; }

bb_missing_apt() {  # $@: packages
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

bb_install_apt() {  # $@: packages (default: BB_APT_PACKAGES)
  local pkgs=("$@")
  [ ${#pkgs[@]} -eq 0 ] && pkgs=("${BB_APT_PACKAGES[@]}")
  command -v dpkg-query >/dev/null || { bb_say "not a Debian system: install ${pkgs[*]} yourself"; return; }
  local missing
  missing=$(bb_missing_apt "${pkgs[@]}" | tr '\n' ' ')
  [ -z "$missing" ] && return
  if [ "${BB_NO_INSTALL:-0}" = 1 ]; then
    bb_say "not installing $missing (BB_NO_INSTALL=1); CMake must find them elsewhere"
    return
  fi
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  bb_say "installing $missing"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

bb_has_torch() {  # $1: python; true if it imports the pinned torch and PyYAML
  "$1" -c 'import sys, torch, yaml; sys.exit(0 if torch.__version__.split("+")[0] == "2.11.0" else 1)' 2>/dev/null
}

# Sets BB_PY: BB_PYTHON, else the project's .venv, else a python3 that already has torch 2.11
# (GPU hosts), else a new .venv with torch from PyPI.
bb_choose_python() {
  if [ -n "${BB_PYTHON:-}" ]; then
    BB_PY=$BB_PYTHON
  elif [ -x "$BB_ROOT/.venv/bin/python" ]; then
    BB_PY=$BB_ROOT/.venv/bin/python
  elif bb_has_torch python3; then
    BB_PY=$(command -v python3)
  else
    [ "${BB_NO_INSTALL:-0}" = 1 ] && { bb_say "no python3 with $BB_TORCH_PIN and BB_NO_INSTALL=1"; exit 1; }
    if ! python3 -m venv --help >/dev/null 2>&1; then
      bb_install_apt python3-venv
    fi
    bb_say "creating $BB_ROOT/.venv"
    python3 -m venv "$BB_ROOT/.venv"
    BB_PY=$BB_ROOT/.venv/bin/python
  fi
  if ! bb_has_torch "$BB_PY"; then
    [ "${BB_NO_INSTALL:-0}" = 1 ] && { bb_say "$BB_PY lacks $BB_TORCH_PIN or PyYAML and BB_NO_INSTALL=1"; exit 1; }
    bb_say "installing $BB_TORCH_PIN, numpy and PyYAML into $BB_PY (a few minutes the first time)"
    "$BB_PY" -m pip install -q --disable-pip-version-check "$BB_TORCH_PIN" numpy pyyaml
  fi
  bb_install_plotly
  bb_say "python: $BB_PY ($("$BB_PY" -c 'import torch; print("torch", torch.__version__)'))"
}

# plotly for bbcompare's pages, into the chosen Python unless it was given (BB_PYTHON) or nothing may be
# installed; a failure only costs --html.
bb_install_plotly() {
  "$BB_PY" -c 'import plotly' 2>/dev/null && return
  if [ -n "${BB_PYTHON:-}" ] || [ "${BB_NO_INSTALL:-0}" = 1 ]; then
    bb_say "$BB_PY has no plotly: bbcompare --html will not work (pip install $BB_PLOTLY_PIN)"
    return
  fi
  "$BB_PY" -m pip install -q --disable-pip-version-check "$BB_PLOTLY_PIN" ||
    bb_say "could not install $BB_PLOTLY_PIN: bbcompare --html will not work"
}

# What only the tests need: Chromium (Debian's) for the page tests.
bb_install_test_tools() {
  bb_install_apt "${BB_TEST_APT_PACKAGES[@]}"
}

# Ray, for scripts/bbreplay_ray.py and its test (integration.ray), which is skipped without it: installed
# into the project's Python when missing (scripts/test calls this; nothing else needs Ray). Not into a
# BB_PYTHON you chose, nor with BB_NO_INSTALL=1: `$BB_PY -m pip install "$BB_RAY_PIN"` does it by hand.
bb_install_ray() {
  "$BB_PY" -c 'import ray' 2>/dev/null && return
  if [ "${BB_NO_INSTALL:-0}" = 1 ] || [ -n "${BB_PYTHON:-}" ]; then
    bb_say "no ray in $BB_PY (BB_NO_INSTALL or BB_PYTHON set): integration.ray is skipped"
    return
  fi
  bb_say "installing $BB_RAY_PIN into $BB_PY (for scripts/bbreplay_ray.py; a minute or two)"
  "$BB_PY" -m pip install -q --disable-pip-version-check --no-compile "$BB_RAY_PIN"
}

# Liger-Kernel, for backends/liger and its test (integration.liger, which checks less without it): installed
# into the project's Python when missing, without its dependencies (torch and triton are there), on the
# same terms as Ray above.
bb_install_liger() {
  "$BB_PY" -c 'import liger_kernel' 2>/dev/null && return
  if [ "${BB_NO_INSTALL:-0}" = 1 ] || [ -n "${BB_PYTHON:-}" ]; then
    bb_say "no liger_kernel in $BB_PY (BB_NO_INSTALL or BB_PYTHON set): integration.liger checks less"
    return
  fi
  "$BB_PY" -m pip install -q --disable-pip-version-check --no-compile --no-deps "$BB_LIGER_PIN"
}

bb_build() {
  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  # shellcheck disable=SC2086
  cmake -S "$BB_ROOT" -B "$BB_BUILD_DIR" "${gen[@]}" -DPython3_EXECUTABLE="$BB_PY" ${BB_CMAKE_ARGS:-} >/dev/null
  # shellcheck disable=SC2086
  cmake --build "$BB_BUILD_DIR" -j"$(nproc)" ${BB_BUILD_TARGETS:+--target $BB_BUILD_TARGETS}
}

bb_setup_and_build() {
  bb_install_apt
  bb_choose_python
  bb_build
}
