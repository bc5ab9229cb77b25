"""Fails when an op listed in the generated dialect reference is absent from
a test file. Usage: check_op_coverage.py BraidDialect.md ops.mlir"""
import re
import sys

doc, test = open(sys.argv[1]).read(), open(sys.argv[2]).read()
ops = sorted(set(re.findall(r"^### `(braid\.[a-z_]+)`", doc, re.M)))
if not ops:
    sys.exit(f"no ops found in {sys.argv[1]}")
used = set(re.findall(r"\b(braid\.[a-z_]+)\b", test))
missing = [op for op in ops if op not in used]
if missing:
    sys.exit("ops missing from %s: %s" % (sys.argv[2], ", ".join(missing)))
print(f"all {len(ops)} ops covered")
