#!/usr/bin/env python3
"""Reference logits from Hugging Face transformers for braid-run --check-against.

Runs a model in transformers (eager attention, no KV cache: one forward over
the prompt and the forced tokens) and writes the safetensors file braid-run
compares its own logits with (docs/plan-and-runtime.md, --check-against):

  step0.logits [B, T, V']  the prefill: every prompt position with
                           --all-positions (a plan compiled with
                           --prefill-all-logits), else the last (T = 1)
  stepK.logits [B, 1, V']  decode step K, whose input is the forced token K
  columns      [V']        with --columns N: N evenly spread vocabulary ids,
                           the only ones written and compared
  input_ids    [B, S]      the prompt, so braid-run refuses another one

The model is either

  * a checkpoint directory as transformers saves one (config.json and
    model.safetensors or a sharded index): the file to compare
    `braid-run --weights DIR` with; or
  * a config.json with --generated flat|fan-in: Braid's own generated
    weights (runtime/WeightFormula.h, re-implemented here bit for bit; the
    same --seed), to compare a run without --weights, given the same
    --weight-scale.

Decode steps are teacher-forced: pass braid-run the same --tokens and
--force-tokens (a plan compiled with braid-compile --batch B, or run with
braid-run --sequences B), so a near-tie argmax cannot make the runs
diverge; without forced tokens the file holds the prefill only (braid-run
--steps 0). For a bf16 or fp16 plan compare with the fp32 reference: two
bf16 implementations differ from each other about as much as each differs
from fp32 (docs/frontend.md). Example:

  scripts/hf_reference.py ckpt/ --tokens 1,15043,29892 --force-tokens 338,263 \\
      --all-positions -o ref.safetensors
  braid-compile ckpt/config.json --seq 3 --max-seq 16 --prefill-all-logits \\
      --dtype fp32 -o model.bplan
  braid-run model.bplan --weights ckpt/ --tokens 1,15043,29892 \\
      --force-tokens 338,263 --steps 2 --check-against ref.safetensors

Needs torch, transformers and safetensors (Braid itself does not).
test/run/Inputs/golden/make_golden.py builds the golden tests' files with
the same functions.
"""
import argparse
import json
import math
import pathlib
import re
import sys

import numpy as np

MASK64 = (1 << 64) - 1


def splitmix64(x):
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & np.uint64(MASK64)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def fnv1a(name):
    h = 14695981039346656037
    for byte in name.encode():
        h ^= byte
        h = (h * 1099511628211) & MASK64
    return h


def is_norm_weight(name):
    if not name.endswith(".weight"):
        return False
    last = name[: -len(".weight")].split(".")[-1]
    return "norm" in last or last.startswith("ln")


def weight_scale(amplitude, shape):
    """runtime/Weights.cpp weightScale: one fp32 scale per tensor."""
    if amplitude == "flat":
        return np.float32(0.02)
    if len(shape) < 2:
        return np.float32(0.25)
    return np.float32(math.sqrt(3.0 / shape[-1]))  # double sqrt, one rounding


def braid_weight(name, shape, amplitude, seed=0):
    """runtime/WeightFormula.h: weightFromHash over the full tensor."""
    n = int(np.prod(shape))
    with np.errstate(over="ignore"):
        idx = np.arange(n, dtype=np.uint64) + np.uint64(fnv1a(name))
        h = splitmix64(np.uint64(seed) ^ splitmix64(idx))
    u = (h >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / (1 << 23))
    u = u - np.float32(1.0)
    v = weight_scale(amplitude, shape) * u
    if is_norm_weight(name):
        v = np.float32(1.0) + v
    return v.reshape(shape)


def braid_name(hf_name, model_type):
    """Braid names parameters as the checkpoints on the Hub do: GPT-2's
    without the "transformer." prefix, GPT-NeoX's LM head "embed_out"
    (transformers 5 calls the module lm_head and renames it on load)."""
    if hf_name.startswith("transformer."):
        return hf_name[len("transformer."):]
    if model_type == "gpt_neox" and hf_name == "lm_head.weight":
        return "embed_out.weight"
    return hf_name


def _is_mask_buffer(name):
    return name.endswith((".attn.bias", ".attn.masked_bias"))  # GPT-2's


def generated_model(config_path, amplitude, seed=0):
    """The transformers model of `config_path` holding the weights braid-run
    generates with --weight-scale `amplitude` --seed `seed`, in fp32."""
    import torch
    import transformers

    cfg_dict = json.loads(pathlib.Path(config_path).read_text())
    config = transformers.AutoConfig.for_model(**cfg_dict)
    config._attn_implementation = "eager"
    # fp32 whatever the config's dtype says (from_config honours it): the
    # weights are set in fp32 and rounded once, by .to(dtype), as Braid does.
    model = transformers.AutoModelForCausalLM.from_config(
        config, attn_implementation="eager", dtype=torch.float32)
    tied = config.tie_word_embeddings
    state = {}
    for name, tensor in model.state_dict().items():
        if (name == "lm_head.weight" and tied) or _is_mask_buffer(name):
            continue
        state[name] = torch.from_numpy(braid_weight(
            braid_name(name, config.model_type), tuple(tensor.shape), amplitude,
            seed))
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing
               if not (m == "lm_head.weight" and tied) and not _is_mask_buffer(m)]
    if missing or unexpected:
        raise RuntimeError(f"generated weights do not fit the model: missing "
                           f"{missing}, unexpected {unexpected}")
    if tied:
        model.tie_weights()
    return model


def checkpoint_model(directory):
    """A checkpoint directory as transformers saved it, in fp32."""
    import torch
    import transformers

    return transformers.AutoModelForCausalLM.from_pretrained(
        directory, attn_implementation="eager", dtype=torch.float32)


def reference_logits(model, dtype, prompts, forced, all_positions, columns):
    """The --check-against tensors of `model` run in `dtype` on `prompts`
    ([B][S] ids) then `forced` ([B][N] ids, teacher-forced decode steps)."""
    import torch

    # The parameters in `dtype`, the buffers (RoPE's inv_freq) as they are:
    # transformers' own bf16 model keeps inv_freq in fp32, and .to(dtype)
    # would round it, an angle error growing with the position.
    model = model.eval()
    for p in model.parameters():
        p.data = p.data.to(dtype)
    ids = torch.tensor([p + f for p, f in zip(prompts, forced)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits.float().numpy()
    s = len(prompts[0])
    keep = slice(None) if columns is None else columns
    out = {"input_ids": np.array(prompts, dtype=np.int64)}
    if columns is not None:
        out["columns"] = columns
    first = 0 if all_positions else s - 1
    out["step0.logits"] = np.ascontiguousarray(logits[:, first:s][:, :, keep])
    for k in range(1, len(forced[0]) + 1):
        out[f"step{k}.logits"] = np.ascontiguousarray(
            logits[:, s - 1 + k:s + k][:, :, keep])
    return out


def spread_columns(vocab, count):
    """`count` vocabulary ids evenly spread over [0, vocab), both ends kept."""
    return np.unique(np.linspace(0, vocab - 1, count).round().astype(np.int64))


def _ids(lists, what):
    """braid-run's id lists: comma-separated decimal ids, a repeated flag
    appending to the list."""
    ids = []
    for text in lists or []:
        items = text.split(",")
        if items and items[-1] == "" and len(items) > 1:
            items.pop()  # one trailing comma
        if not all(re.fullmatch(r"[0-9]+", x) for x in items):
            sys.exit(f"hf_reference: {what} '{text}' is not a comma-separated "
                     f"list of token ids")
        ids += [int(x) for x in items]
    return ids


def _per_sequence(ids, batch, what):
    if not ids or len(ids) % batch:
        sys.exit(f"hf_reference: {what} has {len(ids)} ids, not a whole "
                 f"number per sequence for --batch {batch}")
    n = len(ids) // batch
    return [ids[b * n:(b + 1) * n] for b in range(batch)]


def main(argv=None):
    p = argparse.ArgumentParser(
        description="Reference logits from transformers for braid-run "
                    "--check-against (see the module's doc string).")
    p.add_argument("model", help="checkpoint directory, or config.json with "
                                 "--generated")
    p.add_argument("--generated", choices=["flat", "fan-in"],
                   help="Braid's generated weights at this --weight-scale "
                        "(MODEL is a config.json)")
    p.add_argument("--seed", type=int, default=0,
                   help="braid-run --seed of the generated weights")
    p.add_argument("--tokens", required=True, action="append",
                   help="prompt ids a,b,..., batch x prompt length, sequence "
                        "after sequence, as braid-run's (repeated: appended)")
    p.add_argument("--force-tokens", action="append",
                   help="decode inputs a,b,..., batch x steps, as braid-run's "
                        "(repeated: appended); none: the prefill only")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--all-positions", action="store_true",
                   help="step0 holds every prompt position (a plan compiled "
                        "with --prefill-all-logits)")
    p.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default="fp32",
                   help="dtype of the weights transformers runs with (read in "
                        "fp32, rounded once). Check bf16/fp16 plans against "
                        "the fp32 reference: two bf16 runs differ from each "
                        "other about as much as each from fp32")
    p.add_argument("--columns", type=int, default=0,
                   help="keep N evenly spread vocabulary columns (0: all)")
    p.add_argument("-o", "--output", required=True)
    a = p.parse_args(argv)

    if a.batch < 1:
        sys.exit("hf_reference: --batch must be at least 1")
    if a.columns < 0:
        sys.exit("hf_reference: --columns must be >= 0")
    if not 0 <= a.seed <= MASK64:
        sys.exit("hf_reference: --seed must be in [0, 2^64)")
    if a.seed and not a.generated:
        sys.exit("hf_reference: --seed is the generated weights' seed; a "
                 "checkpoint has its own weights (give --generated, or no "
                 "--seed)")
    out_dir = pathlib.Path(a.output).resolve().parent
    if not out_dir.is_dir():
        sys.exit(f"hf_reference: -o {a.output}: directory '{out_dir}' does "
                 f"not exist")
    prompts = _per_sequence(_ids(a.tokens, "--tokens"), a.batch, "--tokens")
    forced_ids = _ids(a.force_tokens, "--force-tokens")
    if a.force_tokens is not None and not forced_ids:
        sys.exit("hf_reference: --force-tokens needs at least one token id")
    forced = (_per_sequence(forced_ids, a.batch, "--force-tokens")
              if forced_ids else [[] for _ in range(a.batch)])

    import torch
    import transformers
    from safetensors.numpy import save_file

    model_path = pathlib.Path(a.model)
    if a.generated:
        if not model_path.is_file():
            sys.exit(f"hf_reference: --generated needs MODEL to be a "
                     f"config.json, got '{a.model}'")
        model = generated_model(model_path, a.generated, a.seed)
    else:
        if not model_path.is_dir():
            sys.exit(f"hf_reference: '{a.model}' is not a checkpoint "
                     f"directory (a config.json alone needs --generated)")
        model = checkpoint_model(model_path)
    vocab = model.config.vocab_size
    bad = [i for seq in prompts + forced for i in seq if i >= vocab]
    if bad:
        sys.exit(f"hf_reference: token id {bad[0]} is outside the "
                 f"vocabulary [0, {vocab})")
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16,
             "fp16": torch.float16}[a.dtype]
    columns = spread_columns(vocab, a.columns) if a.columns else None
    out = reference_logits(model, dtype, prompts, forced, a.all_positions,
                           columns)
    save_file(out, a.output, metadata={
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "model": model_path.name,
        "dtype": a.dtype,
        "weights": f"generated {a.generated} seed {a.seed}" if a.generated
                   else "checkpoint",
    })
    print(f"hf_reference: wrote {a.output}: the prefill and "
          f"{len(forced[0])} decode steps, max |logit| "
          f"{np.abs(out['step0.logits']).max():.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
