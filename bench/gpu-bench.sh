#!/usr/bin/env bash
# Every GPU benchmark of the CUDA executor in one run, on one GPU:
#   bench/gpu-bench.sh CONFIG.json [LAYERS]
# compiles CONFIG at tp 1 (bf16, LAYERS decoder layers if given), times the
# same decode step in PyTorch (bench/torch_decode.py: eager and CUDA graphs;
# skipped when PyTorch is missing), then runs braid-cuda-bench with those
# results beside its own. Environment: BATCH (1), SEQ (prefill, 128),
# MAX_SEQ (KV cache, 4096), ITERS (100), BRAID_BUILD (build).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BRAID_BUILD:-$root/build}"
config="${1:?usage: bench/gpu-bench.sh CONFIG.json [LAYERS]}"
layers="${2:-}"
batch="${BATCH:-1}" seq="${SEQ:-128}" max_seq="${MAX_SEQ:-4096}" iters="${ITERS:-100}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if [ -n "$layers" ]; then
  python3 - "$config" "$layers" "$work/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["num_hidden_layers"] = int(sys.argv[2])
json.dump(c, open(sys.argv[3], "w"))
PY
  config="$work/config.json"
fi

"$build/bin/braid-compile" "$config" --tp 1 --dtype bf16 --batch "$batch" \
  --seq "$seq" --max-seq "$max_seq" -o "$work/plan.bplan"
torch=()
if python3 "$root/bench/torch_decode.py" "$config" --batch "$batch" \
     --max-seq "$max_seq" --iters "$iters" -o "$work/torch.json" >/dev/null; then
  torch=(--torch "$work/torch.json")
else
  echo "(no PyTorch rows: torch_decode.py did not run; see its message)"
fi
"$build/bin/braid-cuda-bench" "$work/plan.bplan" --iters "$iters" "${torch[@]}"
