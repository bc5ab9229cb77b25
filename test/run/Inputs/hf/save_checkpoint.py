#!/usr/bin/env python3
"""Saves a random-weight transformers checkpoint of CONFIG.json into DIR, for
hf-reference.test: matrices with std 1/sqrt(their last dim), so attention is
as peaked as in a trained model (transformers' own 0.02 leaves it nearly
uniform, where a position or mask error barely shows).

  save_checkpoint.py CONFIG.json DIR [SEED]
"""
import json
import sys

import torch
import transformers


def main():
    config_path, out = sys.argv[1], sys.argv[2]
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    with open(config_path) as f:
        config = transformers.AutoConfig.for_model(**json.load(f))
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config,
                                                          dtype=torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0, p.shape[-1] ** -0.5)
    model.save_pretrained(out)


if __name__ == "__main__":
    main()
