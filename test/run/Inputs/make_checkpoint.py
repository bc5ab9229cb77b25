"""Writes a safetensors checkpoint for every parameter a plan lists.

Reads `braid-run PLAN --print-plan` on stdin ("param i "name" dtype local
full FULL ..." lines) and writes float32 values from a seeded PRNG with the
FULL shapes, as a Hugging Face checkpoint would hold them. With
--wrong-shape NAME, that tensor gets one extra row (a mis-shaped
checkpoint); with --drop NAME it is left out; with --nan NAME its first
element is NaN; with --huge NAME every element is 3e38 (finite, but its
products overflow to infinity).
"""
import argparse, json, random, re, struct, sys

parser = argparse.ArgumentParser()
parser.add_argument("output")
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--wrong-shape", default="")
parser.add_argument("--drop", default="")
parser.add_argument("--nan", default="")
parser.add_argument("--huge", default="")
args = parser.parse_args()

rng = random.Random(args.seed)
header, blobs, offset = {}, [], 0
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
    data = struct.pack("<%df" % count, *values)
    header[name] = {"dtype": "F32", "shape": shape,
                    "data_offsets": [offset, offset + len(data)]}
    blobs.append(data)
    offset += len(data)

text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(args.output, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
