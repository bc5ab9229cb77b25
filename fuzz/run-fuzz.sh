#!/usr/bin/env bash
# Bounded fuzz run of one target (the ctests fuzz-plan-loader,
# fuzz-safetensors, fuzz-config, fuzz-cost, fuzz-ir, fuzz-command-line).
#
#   run-fuzz.sh TARGET FUZZER BRAID_COMPILE REPO_ROOT ARTIFACT_DIR [libFuzzer flags...]
#
# TARGET is plan-loader, safetensors, config, cost, ir or command-line (the module cost-fuzzer
# prices is compiled with BRAID_COMPILE into ARTIFACT_DIR). Writes the target's seeds into
# a fresh temporary corpus (nothing binary is committed: plans are compiled
# with BRAID_COMPILE, checkpoints written by fuzz/seeds/make-safetensors-seeds.py,
# configs copied from models/, test/frontend/Inputs/ and the golden configs of
# test/run/Inputs/golden/), then fuzzes for
# BRAID_FUZZ_SECONDS (default 30) with the target's dictionary
# (fuzz/dict/TARGET.dict) if there is one. Exits non-zero if the fuzzer
# reports a crash, sanitizer error, leak, timeout or OOM; the reproducer is
# kept in ARTIFACT_DIR (rerun it with `FUZZER <file>`).
#
# BRAID_FUZZ_CORPUS=DIR uses (and grows) DIR instead of a temporary corpus,
# seeding it first: for the long runs in docs/hostile-input.md.
set -euo pipefail

if [ $# -lt 5 ]; then
  echo "usage: $0 plan-loader|safetensors|config|cost|ir FUZZER BRAID_COMPILE REPO_ROOT ARTIFACT_DIR [libFuzzer flags...]" >&2
  exit 2
fi
target=$1 fuzzer=$2 compile=$3 root=$4 artifacts=$5
shift 5
name="fuzz-$target"

for bin in "$fuzzer" "$compile"; do
  if [ ! -x "$bin" ]; then
    echo "$name: $bin is missing: build the default target first" >&2
    exit 1
  fi
done

if [ -n "${BRAID_FUZZ_CORPUS:-}" ]; then
  corpus=$BRAID_FUZZ_CORPUS
  mkdir -p "$corpus"
else
  corpus=$(mktemp -d "${TMPDIR:-/tmp}/braid-$name-corpus.XXXXXX")
  trap 'rm -rf "$corpus"' EXIT
fi

# Plans: world_size 1 and 2 (both small enough that the fuzzer runs them and
# drives generate()), fp32 and bf16 storage, LLaMA and GPT-2.
plan_seed() {
  local seed=$1
  shift
  if ! "$compile" "$@" -o "$corpus/$seed.bplan"; then
    echo "$name: braid-compile $* failed" >&2
    exit 1
  fi
}

case "$target" in
plan-loader)
  plan_seed llama-tp1-fp32 --tp 1 --dtype fp32 --seq 4 --max-seq 8
  plan_seed llama-tp1-bf16 --tp 1 --dtype bf16 --seq 4 --max-seq 8
  plan_seed llama-tp2-fp32 --tp 2 --dtype fp32 --seq 4 --max-seq 8
  plan_seed gpt2-tp1 "$root/test/frontend/Inputs/tiny-gpt2.json" --tp 1 --seq 4 --max-seq 8
  plan_seed gpt2-tp2 "$root/test/frontend/Inputs/tiny-gpt2.json" --tp 2 --seq 4 --max-seq 8
  plan_seed gpt2-tp2-sharded "$root/test/frontend/Inputs/tiny-gpt2.json" --tp 2 --seq 4 --max-seq 8 --keep-logits-sharded
  ;;
safetensors)
  python3 "$root/fuzz/seeds/make-safetensors-seeds.py" "$corpus"
  ;;
config)
  for f in "$root"/models/*/config.json "$root"/test/frontend/Inputs/*.json \
           "$root"/test/run/Inputs/golden/*.json; do
    [ -f "$f" ] || continue
    case "$f" in *-rope.json) continue ;; esac
    cp "$f" "$corpus/$(basename "$(dirname "$f")")-$(basename "$f")"
  done
  # The option line (see fuzz/ConfigFuzzer.cpp): other import options.
  { echo "#braid --tp 4 --batch 2 --seq 3 --max-seq 16 --dtype fp32"
    cat "$root/models/tiny-llama/config.json"; } > "$corpus/tiny-llama-tp4.json"
  { echo "#braid --tp 2 --max-seq 64 --prefill-bucket 4 --prefill-bucket 16"
    cat "$root/test/run/Inputs/golden/mistral.json"; } > "$corpus/mistral-buckets.json"
  { echo "#braid --tp 2 --dtype fp16 --keep-logits-sharded --prefill-all-logits"
    cat "$root/test/frontend/Inputs/tiny-gpt2.json"; } > "$corpus/tiny-gpt2-opts.json"
  ;;
cost)
  # The module every input prices (fuzz/CostFuzzer.cpp): kept beside the
  # corpus, not in it.
  module="$artifacts/cost-module.mlir"
  mkdir -p "$artifacts"
  if ! "$compile" --tp 4 --seq 8 --max-seq 16 --sp-force --decompose 2 \
      --emit-mlir -o "$module"; then
    echo "$name: braid-compile --emit-mlir failed" >&2
    exit 1
  fi
  export BRAID_COST_FUZZ_MODULE="$module"
  for f in "$root"/targets/*.json "$root"/test/passes/Inputs/*target*.json; do
    [ -f "$f" ] && cp "$f" "$corpus/$(basename "$f")"
  done
  for f in "$root"/test/passes/Inputs/*.csv; do
    [ -f "$f" ] || continue
    { echo "#calibration"; cat "$f"; } > "$corpus/calibration-$(basename "$f")"
  done
  ;;
ir)
  # Hand-written IR as the tests hold it (split files included: the fuzzer
  # splits at `// -----` too), and compiled modules: imported (the
  # pipeline runs on them) and scheduled (two streams, events, buffers).
  find "$root/test" -name '*.mlir' | while read -r f; do
    cp "$f" "$corpus/$(echo "${f#"$root"/test/}" | tr / -)"
  done
  import="$(dirname "$compile")/braid-import"
  "$import" --tp 2 --seq 4 --max-seq 8 --dtype fp32 > "$corpus/imported-tp2.mlir"
  "$compile" --tp 2 --seq 8 --max-seq 16 --decompose 2 --emit-mlir \
    -o "$corpus/compiled-tp2-chunks.mlir"
  ;;
command-line)
  # braid-run's argument lists as test/run's RUN lines hold them (lit's
  # %t and %S left as they are), one argument per line; and prompt files.
  # (Split at blanks, unglobbed: set -f.)
  n=0
  tests=("$root"/test/run/*.test)
  set -f
  while read -r line; do
    n=$((n + 1))
    # shellcheck disable=SC2086
    printf '%s\n' ${line#braid-run } > "$corpus/args-$n"
  done < <(grep -h 'braid-run ' "${tests[@]}" |
           sed -E 's/.*braid-run //; s/ *[|].*//; s/ *[0-9]*>.*//' | sort -u)
  set +f
  printf '#tokens\n1, 4007 15823,9\n271\n' > "$corpus/prompt-commas"
  printf '#tokens\n\n  \t-1 x 2' > "$corpus/prompt-bad"
  ;;
*)
  echo "$name: unknown target '$target' (plan-loader, safetensors, config, cost, ir, command-line)" >&2
  exit 2
  ;;
esac

dict=()
if [ -f "$root/fuzz/dict/$target.dict" ]; then
  dict=(-dict="$root/fuzz/dict/$target.dict")
fi

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
  -print_final_stats=1 -artifact_prefix="$artifacts/" "${dict[@]}" "$@" \
  "$corpus" || rc=$?
if [ "$rc" -ne 0 ]; then
  echo "$name: FAILED (libFuzzer exit $rc); reproducer(s) in $artifacts:" >&2
  ls -t "$artifacts" >&2 || true
  echo "rerun one with: $fuzzer $artifacts/<file>" >&2
  exit 1
fi
