#!/usr/bin/env python3
"""Writes the golden logits of test/run/golden-logits.test with transformers.

For each shrunk config in this directory (2 layers, real vocabulary, eps,
theta, RoPE scaling, GQA ratio, tying and sliding window of the family it
stands for), builds the Hugging Face model with Braid's deterministic
weights (runtime/WeightFormula.h, re-implemented bit for bit in
scripts/hf_reference.py), runs
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

The committed flat bf16 files were written while bf16 runs still rounded
RoPE's inv_freq buffer too (transformers' own bf16 model keeps it fp32, as
hf_reference.py now does); rewritten they differ by at most one bf16 ulp
of their logits, and their distance from the fp32 files is unchanged.

Needs torch, transformers and safetensors (not needed by the tests):
  python3 make_golden.py            # rewrites every *.safetensors here
  python3 make_golden.py a.json ... # only those configs' files
"""
import json
import pathlib
import sys

import numpy as np
import torch
import transformers
from safetensors.numpy import save_file

HERE = pathlib.Path(__file__).resolve().parent
# The weights and the forward pass are scripts/hf_reference.py's, the tool
# users make their own reference files with.
sys.path.insert(0, str(HERE.parents[3] / "scripts"))
import hf_reference  # noqa: E402

PROMPT = [1, 4007, 15823, 9, 271, 30000, 17, 8812, 2047, 31999, 5, 12345]
FORCED = [77, 25000, 3, 19999]
SEED = 0
COLUMNS = 1024


def golden(config_path, dtype, amplitude):
    model = hf_reference.generated_model(config_path, amplitude, SEED)
    columns = hf_reference.spread_columns(model.config.vocab_size, COLUMNS)
    return hf_reference.reference_logits(model, dtype, [PROMPT], [FORCED],
                                         all_positions=True, columns=columns)


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
