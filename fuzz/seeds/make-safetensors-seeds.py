#!/usr/bin/env python3
"""Writes seed checkpoints for fuzz/SafetensorsFuzzer.cpp into DIR.

  make-safetensors-seeds.py DIR

Plain Python (no safetensors package): an 8-byte little-endian header
length, the JSON header (padded with spaces to a multiple of 8, as HF
does), the data. Names and shapes match the fuzzer's plans, so mutations
start from files whose parameters load: mlp.up_proj.weight [16, 8],
mlp.down_proj.weight [8, 16], model.norm.weight [8], the GPT-2 name
transformer.h.0.ln_1.weight [8] and the tied model.embed_tokens.weight
[32, 8]. And reference logits files (braid-run --check-against) for the
fuzzer's small run: step0.logits [2, 2, 4], step1/step2.logits [2, 1, 4],
input_ids [2, 2] = the run's prompt, and a columns variant. Deterministic
(no randomness), nothing binary is committed.
"""
import json
import os
import struct
import sys

SIZES = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "U8": 1, "BOOL": 1}


def values(n, dtype):
    """n deterministic values encoded as dtype."""
    out = bytearray()
    for i in range(n):
        x = ((i * 37) % 17 - 8) / 16.0
        if dtype == "F32":
            out += struct.pack("<f", x)
        elif dtype == "F16":
            out += struct.pack("<e", x)
        elif dtype == "BF16":
            out += struct.pack("<f", x)[2:]
        elif dtype in ("I64", "I32"):
            out += struct.pack("<q" if dtype == "I64" else "<i", i - n // 2)
        else:
            out += bytes([i & 1])
    return bytes(out)


def write(path, tensors, metadata=None, pad=True):
    header, data = {}, bytearray()
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, *given in tensors:
        n = 1
        for d in shape:
            n *= d
        blob = given[0] if given else values(n, dtype)
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + bytes(data))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make-safetensors-seeds.py DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    mlp = [("mlp.up_proj.weight", [16, 8]), ("mlp.down_proj.weight", [8, 16]),
           ("model.norm.weight", [8])]
    gpt2 = [("transformer.h.0.ln_1.weight", [8]),
            ("model.embed_tokens.weight", [32, 8])]
    for dt in ("F32", "BF16", "F16"):
        write(f"{out}/mlp-{dt.lower()}.safetensors",
              [(n, dt, s) for n, s in mlp + gpt2],
              metadata={"format": "pt"})
    # Mixed dtypes, an integer buffer the loader must refuse to read as a
    # parameter, an unpadded header, and the empty checkpoint.
    write(f"{out}/mixed.safetensors",
          [("mlp.up_proj.weight", "BF16", [16, 8]),
           ("mlp.down_proj.weight", "F32", [8, 16]),
           ("model.norm.weight", "I64", [8]),
           ("position_ids", "I32", [1, 4]),
           ("flags", "BOOL", [3]), ("scalar", "F32", [])], pad=False)
    write(f"{out}/lm-head.safetensors",
          [("lm_head.weight", "F32", [32, 8]), ("h.0.ln_1.weight", "F16", [8])])
    write(f"{out}/empty.safetensors", [])
    # Reference logits of the fuzzer's run (batch 2, prompt 1 2 / 3 0,
    # vocabulary 4, prefill with both positions, 2 decode steps).
    ids = struct.pack("<4q", 1, 2, 3, 0)
    steps = [(f"step{k}.logits", "F32", [2, 2 if k == 0 else 1, 4])
             for k in range(3)]
    write(f"{out}/logits.safetensors", steps + [("input_ids", "I64", [2, 2], ids)])
    write(f"{out}/logits-columns.safetensors",
          [(n, dt, s[:2] + [2]) for n, dt, s in steps] +
          [("columns", "I64", [2], struct.pack("<2q", 0, 3))])


if __name__ == "__main__":
    main()
