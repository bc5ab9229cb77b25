#!/usr/bin/env bash
# Bounded fuzz run of the plan loader (the ctest `fuzz-plan-loader`).
#
#   run-fuzz.sh FUZZER BRAID_COMPILE REPO_ROOT ARTIFACT_DIR [libFuzzer flags...]
#
# Compiles a few seed plans into a fresh temporary corpus, then fuzzes for
# BRAID_FUZZ_SECONDS (default 30). Exits non-zero if the fuzzer reports a
# crash, sanitizer error, leak, timeout or OOM; the reproducer is kept in
# ARTIFACT_DIR (rerun it with `FUZZER <file>`).
set -euo pipefail

if [ $# -lt 4 ]; then
  echo "usage: $0 FUZZER BRAID_COMPILE REPO_ROOT ARTIFACT_DIR [libFuzzer flags...]" >&2
  exit 2
fi
fuzzer=$1 compile=$2 root=$3 artifacts=$4
shift 4

for bin in "$fuzzer" "$compile"; do
  if [ ! -x "$bin" ]; then
    echo "fuzz-plan-loader: $bin is missing: build the default target first" >&2
    exit 1
  fi
done

corpus=$(mktemp -d "${TMPDIR:-/tmp}/braid-fuzz-corpus.XXXXXX")
trap 'rm -rf "$corpus"' EXIT

# Seeds: world_size 1 plans (small enough that the fuzzer also executes
# them), in fp32 and bf16 storage, LLaMA and GPT-2; and a tp 2 plan for the
# loader's group and collective checks.
seed() {
  local name=$1
  shift
  if ! "$compile" "$@" -o "$corpus/$name.bplan"; then
    echo "fuzz-plan-loader: braid-compile $* failed" >&2
    exit 1
  fi
}
seed llama-tp1-fp32 --tp 1 --dtype fp32 --seq 4 --max-seq 8
seed llama-tp1-bf16 --tp 1 --dtype bf16 --seq 4 --max-seq 8
seed llama-tp2-fp32 --tp 2 --dtype fp32 --seq 4 --max-seq 8
seed gpt2-tp1 "$root/test/frontend/Inputs/tiny-gpt2.json" --tp 1 --seq 4 --max-seq 8

# Readable sanitizer stack traces when a symbolizer is installed (llvm-14).
for s in llvm-symbolizer-14 llvm-symbolizer; do
  if command -v "$s" >/dev/null; then
    export ASAN_SYMBOLIZER_PATH="${ASAN_SYMBOLIZER_PATH:-$(command -v "$s")}"
    break
  fi
done
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"

mkdir -p "$artifacts"
seconds=${BRAID_FUZZ_SECONDS:-30}
rc=0
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "$@" "$corpus" || rc=$?
if [ "$rc" -ne 0 ]; then
  echo "fuzz-plan-loader: FAILED (libFuzzer exit $rc); reproducer(s) in $artifacts:" >&2
  ls -t "$artifacts" >&2 || true
  echo "rerun one with: $fuzzer $artifacts/<file>" >&2
  exit 1
fi
