#!/usr/bin/env bash
# Runs one fuzz target from its seed corpus, the same way every time (fixed seed, limits and scratch
# file; ctest adds -runs=N so that every machine tries the same inputs), and fails on any crash, leak,
# timeout (an input taking over 10 s) or out-of-memory. New inputs go to a scratch folder, never into
# the repository's corpus.
#   run.sh fuzzer-binary tests/fuzz target seconds work-dir [libFuzzer options...]
set -euo pipefail
bin=$1 here=$2 target=$3 seconds=$4 work=$5
shift 5
[ -x "$bin" ] || { echo "no $bin (fuzz.build makes it)" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work/new"
export BB_FUZZ_SCRATCH="$work/scratch.in"
export ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
status=0
# The same inputs every run needs the same addresses too (the readers' paths depend on them a little):
# address randomization off where the machine allows it, and no rereading of the corpus folder.
norandom=()
setarch "$(uname -m)" -R true 2>/dev/null && norandom=(setarch "$(uname -m)" -R)
"${norandom[@]}" "$bin" -seed=1 -reload=0 -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=65536 \
       -dict="$here/$target.dict" -artifact_prefix="$work/" -print_final_stats=1 "$@" \
       "$work/new" "$here/corpus/$target" || status=$?
for f in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* "$work"/slow-unit-*; do
  [ -e "$f" ] || continue
  echo "finding: $f (keep it in tests/fuzz/corpus/$target once the reader is fixed); as base64:"
  base64 -w0 "$f" | head -c 4000
  echo
done
exit "$status"
