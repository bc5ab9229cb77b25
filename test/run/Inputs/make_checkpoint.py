"""Writes a safetensors checkpoint for every parameter a plan lists.

Reads `braid-run PLAN --print-plan` on stdin ("param i "name" dtype local
full FULL ..." lines) and writes values from a seeded PRNG with the FULL
shapes, as a Hugging Face checkpoint would hold them (float32 unless
--dtype bf16 or f16). With --wrong-shape NAME, that tensor gets one extra
row (a mis-shaped checkpoint); with --drop NAME it is left out; with --nan
NAME its first element is NaN; with --huge NAME every element is 3e38
(finite, but its products overflow to infinity). --extra NAME adds a [4, 4]
tensor the plan does not use; --inv-freq adds a rotary inv_freq buffer
(`model.layers.0.self_attn.rotary_emb.inv_freq`, as older HF LLaMA
checkpoints carry). The values do not depend on --dtype's storage beyond
its rounding, nor on --shards, --strip-prefix or --both.

With --strip-prefix, names lose their base-model prefix (`model.`,
`gpt_neox.`, `transformer.`), as a base model's save_pretrained writes
them (LlamaModel: `embed_tokens.weight`, `layers.0.self_attn.q_proj.weight`;
the LM heads have no prefix and keep their names). --both NAME also writes
parameter NAME under its plan name, with the same values (a checkpoint
holding both spellings of one tensor).

With --shards N, OUTPUT is a directory: the tensors are split in plan order
into N files model-0000i-of-0000N.safetensors plus the
model.safetensors.index.json that maps each tensor to its file, as
transformers' save_pretrained writes a sharded checkpoint.
"""
import argparse, json, os, random, re, struct, sys

parser = argparse.ArgumentParser()
parser.add_argument("output")
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--wrong-shape", default="")
parser.add_argument("--drop", default="")
parser.add_argument("--nan", default="")
parser.add_argument("--huge", default="")
parser.add_argument("--extra", default="")
parser.add_argument("--inv-freq", action="store_true")
parser.add_argument("--dtype", choices=["f32", "bf16", "f16"], default="f32")
parser.add_argument("--shards", type=int, default=0)
parser.add_argument("--strip-prefix", action="store_true")
parser.add_argument("--both", default="")
args = parser.parse_args()

BASE_PREFIXES = ("model.", "gpt_neox.", "transformer.")


def stripped(name):
    for prefix in BASE_PREFIXES:
        if name.startswith(prefix) and len(name) > len(prefix):
            return name[len(prefix):]
    return name


def encode(values):
    if args.dtype == "f32":
        return struct.pack("<%df" % len(values), *values)
    if args.dtype == "f16":
        return struct.pack("<%de" % len(values), *values)
    out = bytearray()
    for v in values:
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        if v != v:  # NaN stays NaN
            out += struct.pack("<H", 0x7FC0)
            continue
        # Round to nearest even, as the runtime's floatToBf16 does.
        bits += 0x7FFF + ((bits >> 16) & 1)
        out += struct.pack("<H", (bits >> 16) & 0xFFFF)
    return bytes(out)


rng = random.Random(args.seed)
tensors = []  # (name, shape, values) in plan order
for line in sys.stdin:
    m = re.match(r'param \d+ "([^"]+)" \S+ \S+ full (\S+)', line)
    if not m or m.group(1) == args.drop:
        continue
    name, shape = m.group(1), [int(d) for d in m.group(2).split("x")]
    if name == args.wrong_shape:
        shape[0] += 1
    count = 1
    for d in shape:
        count *= d
    # Norm weights near 1 keep activations in range, as real ones do.
    base = 1.0 if "norm" in name or ".ln_" in name else 0.0
    values = [base + rng.uniform(-0.05, 0.05) for _ in range(count)]
    if name == args.nan:
        values[0] = float("nan")
    if name == args.huge:
        values = [3e38] * count
    if args.strip_prefix:
        if name == args.both:
            tensors.append((name, shape, values))
        name = stripped(name)
    tensors.append((name, shape, values))
if args.extra:
    tensors.append((args.extra, [4, 4], [0.5] * 16))
if args.inv_freq:
    tensors.append(("model.layers.0.self_attn.rotary_emb.inv_freq", [8],
                    [10000.0 ** (-i / 8) for i in range(8)]))

dtype_name = {"f32": "F32", "bf16": "BF16", "f16": "F16"}[args.dtype]


def write(path, group):
    header, blobs, offset = {}, [], 0
    for name, shape, values in group:
        data = encode(values)
        header[name] = {"dtype": dtype_name, "shape": shape,
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    return offset


if args.shards <= 0:
    write(args.output, tensors)
    sys.exit(0)

os.makedirs(args.output, exist_ok=True)
n = args.shards
weight_map, total = {}, 0
for i in range(n):
    group = [t for j, t in enumerate(tensors) if j * n // len(tensors) == i]
    shard = "model-%05d-of-%05d.safetensors" % (i + 1, n)
    total += write(os.path.join(args.output, shard), group)
    for name, _, _ in group:
        weight_map[name] = shard
with open(os.path.join(args.output, "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {"total_size": total}, "weight_map": weight_map},
              f, indent=2)
