"""Edits a logits file that `braid-run --dump-outputs` wrote (F32 stepK.logits
[B, T, V], I64 input_ids [B, S]) into a reference for --check-against:

  edit_logits.py IN OUT [--perturb K I D] [--columns a,b,...]
                        [--set-columns a,b,...] [--input-ids a,b,...]
                        [--drop NAME] [--add NAME]

--perturb adds D to element I (row-major) of stepK.logits; --columns keeps
only those vocabulary columns of every step and stores them as `columns`
(I64); --set-columns then overwrites the stored ids (to make them
wrong); --input-ids replaces the prompt's values; --drop removes a tensor;
--add adds a [1] F32 tensor of that name.
"""
import argparse, json, struct

parser = argparse.ArgumentParser()
parser.add_argument("input")
parser.add_argument("output")
parser.add_argument("--perturb", nargs=3, default=None)
parser.add_argument("--columns", default="")
parser.add_argument("--set-columns", default="")
parser.add_argument("--input-ids", default="")
parser.add_argument("--drop", action="append", default=[])
parser.add_argument("--add", default="")
args = parser.parse_args()

with open(args.input, "rb") as f:
    raw = f.read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
data = raw[8 + n:]
tensors = {}  # name -> (dtype, shape, list of values)
for name, e in header.items():
    if name == "__metadata__":
        continue
    b, end = e["data_offsets"]
    fmt = {"F32": "f", "I64": "q"}[e["dtype"]]
    count = (end - b) // struct.calcsize(fmt)
    tensors[name] = [e["dtype"], e["shape"],
                     list(struct.unpack("<%d%s" % (count, fmt), data[b:end]))]

if args.perturb:
    k, i, d = args.perturb
    tensors["step%s.logits" % k][2][int(i)] += float(d)
if args.columns:
    cols = [int(c) for c in args.columns.split(",")]
    for name, t in tensors.items():
        if name.endswith(".logits"):
            v = t[1][-1]
            rows = len(t[2]) // v
            t[2] = [t[2][r * v + c] for r in range(rows) for c in cols]
            t[1] = t[1][:-1] + [len(cols)]
    tensors["columns"] = ["I64", [len(cols)], cols]
if args.set_columns:
    tensors["columns"][2] = [int(c) for c in args.set_columns.split(",")]
if args.input_ids:
    tensors["input_ids"][2] = [int(x) for x in args.input_ids.split(",")]
for name in args.drop:
    del tensors[name]
if args.add:
    tensors[args.add] = ["F32", [1], [0.0]]

out_header, blobs, offset = {}, [], 0
for name, (dtype, shape, values) in tensors.items():
    fmt = {"F32": "f", "I64": "q"}[dtype]
    blob = struct.pack("<%d%s" % (len(values), fmt), *values)
    out_header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [offset, offset + len(blob)]}
    blobs.append(blob)
    offset += len(blob)
text = json.dumps(out_header).encode()
text += b" " * (-len(text) % 8)
with open(args.output, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
