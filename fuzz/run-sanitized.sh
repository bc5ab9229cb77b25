#!/usr/bin/env bash
# Runs COMMAND with the sanitizer settings of the ctests san-runtime-tests and
# san-run-lit (fuzz/AddFuzz.cmake):
#
#   run-sanitized.sh COMMAND [ARGS...]
#
# Every ASan, UBSan or LeakSanitizer report aborts the process (SIGABRT), so
# a test that expects a clean error (`not braid-run ...`, exit 1) still fails
# when the error path has a memory error: lit's `not` treats a signal as a
# failure. Stack traces are symbolized when llvm-symbolizer is installed.
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 COMMAND [ARGS...]" >&2
  exit 2
fi
if [ ! -x "$1" ] && ! command -v "$1" >/dev/null; then
  echo "run-sanitized: $1 is missing: build the default target (braid-fuzz) first" >&2
  exit 1
fi
for s in llvm-symbolizer-14 llvm-symbolizer; do
  if command -v "$s" >/dev/null; then
    export ASAN_SYMBOLIZER_PATH="${ASAN_SYMBOLIZER_PATH:-$(command -v "$s")}"
    break
  fi
done
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:abort_on_error=1}"
exec "$@"
