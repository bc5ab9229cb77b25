#!/usr/bin/env python3
"""Writes the golden logits of test/run/golden-logits.test with transformers.

For each shrunk config in this directory (2 layers, real vocabulary, eps,
theta, RoPE scaling, GQA ratio, tying and sliding window of the family it
stands for), builds the Hugging Face model with Braid's deterministic
weights (runtime/WeightFormula.h, re-implemented below bit for bit), runs
PROMPT + FORCED through it in one forward pass and stores, per amplitude
and dtype, the logits braid-run --check-against compares:

  step0.logits [1, len(PROMPT), C]  every prompt position (the plan is
                                   imported with --prefill-all-logits)
  stepK.logits [1, 1, C]            decode step K, whose input is FORCED[K-1]
  columns      [C]                  the vocabulary columns kept
  input_ids    [1, len(PROMPT)]     the prompt, so a wrong one is caught

and, for the RoPE families, <config>-rope.json: transformers' inv_freq
buffer and attention_scaling, which test/unit/RopeConfigTest.cpp compares
with the importer's table exactly (scaled RoPE changes only the slow
frequencies, whose angles at the golden test's 16 positions are too small
to move the logits past the tolerance).

Two amplitudes (braid-run --weight-scale): <config>-<dtype>.safetensors
holds the default flat weights (0.02 x u), whose near-uniform attention
pins the default formula but barely notices a RoPE or mask error;
<config>-fanin-fp32.safetensors holds fan-in weights (std 1/sqrt(last
dim), vectors 0.25 x u), whose peaked attention makes such an error move
the logits by far more than the tolerance (test/run/golden-logits-fan-in.test).

Only C = 1024 evenly spread columns are kept so the files stay small with
real vocabularies (128256 for Llama 3); any RoPE, mask or scale error moves
every column. One forward over the whole sequence (no KV cache) is the
reference for Braid's prefill + cached decode.

Needs torch, transformers and safetensors (not needed by the tests):
  python3 make_golden.py            # rewrites every *.safetensors here
  python3 make_golden.py a.json ... # only those configs' files
"""
import json
import math
import pathlib
import sys

import numpy as np
import torch
import transformers
from safetensors.numpy import save_file

HERE = pathlib.Path(__file__).resolve().parent
PROMPT = [1, 4007, 15823, 9, 271, 30000, 17, 8812, 2047, 31999, 5, 12345]
FORCED = [77, 25000, 3, 19999]
SEED = 0
COLUMNS = 1024
MASK64 = (1 << 64) - 1


def splitmix64(x):
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & np.uint64(MASK64)
    x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9))
    x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB))
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


def braid_weight(name, shape, amplitude):
    """runtime/WeightFormula.h: weightFromHash over the full tensor."""
    n = int(np.prod(shape))
    with np.errstate(over="ignore"):
        idx = np.arange(n, dtype=np.uint64) + np.uint64(fnv1a(name))
        h = splitmix64(np.uint64(SEED) ^ splitmix64(idx))
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


def golden(config_path, dtype, amplitude):
    cfg_dict = json.loads(config_path.read_text())
    config = transformers.AutoConfig.for_model(**cfg_dict)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    # fp32 first whatever the config's dtype says (from_config honours it): the
    # weights are set in fp32 and rounded once, by .to(dtype), as Braid does.
    model = transformers.AutoModelForCausalLM.from_config(
        config, attn_implementation="eager", dtype=torch.float32)
    state = {}
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight" and config.tie_word_embeddings:
            continue
        if name.endswith(".attn.bias") or name.endswith(".attn.masked_bias"):
            continue  # GPT-2's causal-mask buffers, not weights
        state[name] = torch.from_numpy(
            braid_weight(braid_name(name, config.model_type), tuple(tensor.shape),
                         amplitude))
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if not (m == "lm_head.weight" and config.tie_word_embeddings)]
    missing = [m for m in missing if not m.endswith((".attn.bias", ".attn.masked_bias"))]
    assert not missing and not unexpected, (missing, unexpected)
    if config.tie_word_embeddings:
        model.tie_weights()
    model = model.to(dtype).eval()
    ids = torch.tensor([PROMPT + FORCED])
    with torch.no_grad():
        logits = model(input_ids=ids).logits.float().numpy()
    vocab = logits.shape[-1]
    columns = np.unique(np.linspace(0, vocab - 1, COLUMNS).round().astype(np.int64))
    out = {
        "columns": columns,
        "input_ids": np.array([PROMPT], dtype=np.int64),
        "step0.logits": np.ascontiguousarray(logits[:, : len(PROMPT), columns]),
    }
    for k in range(1, len(FORCED) + 1):
        pos = len(PROMPT) - 1 + k
        out[f"step{k}.logits"] = np.ascontiguousarray(logits[:, pos : pos + 1, columns])
    return out


def rope_table(config_path):
    cfg_dict = json.loads(config_path.read_text())
    config = transformers.AutoConfig.for_model(**cfg_dict)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    rotary = getattr(getattr(model, model.base_model_prefix, None), "rotary_emb", None)
    if rotary is None:
        return None
    return {
        "inv_freq": [float(x) for x in rotary.inv_freq.float().tolist()],
        "attention_scaling": float(rotary.attention_scaling),
    }


def main():
    configs = sorted(p for p in HERE.glob("*.json") if not p.name.endswith("-rope.json"))
    if len(sys.argv) > 1:
        wanted = {pathlib.Path(a).name for a in sys.argv[1:]}
        unknown = wanted - {p.name for p in configs}
        if unknown:
            sys.exit(f"no such config here: {', '.join(sorted(unknown))}")
        configs = [p for p in configs if p.name in wanted]
    for path in configs:
        table = rope_table(path)
        if table is not None:
            path.with_name(f"{path.stem}-rope.json").write_text(json.dumps(table, indent=1) + "\n")
        # Fan-in bf16 runs compare against the fp32 logits: two bf16
        # implementations differ by as much as each differs from fp32.
        for amplitude, prefix, tag, dtype in (
                ("flat", "", "fp32", torch.float32),
                ("flat", "", "bf16", torch.bfloat16),
                ("fan-in", "fanin-", "fp32", torch.float32)):
            out = golden(path, dtype, amplitude)
            dest = path.with_name(f"{path.stem}-{prefix}{tag}.safetensors")
            save_file(out, str(dest), metadata={
                "transformers": transformers.__version__,
                "torch": torch.__version__,
                "config": path.name,
                "dtype": tag,
                "weight_scale": amplitude,
            })
            print(f"{dest.name}: max |logit| {np.abs(out['step0.logits']).max():.4f}")


if __name__ == "__main__":
    sys.exit(main())
