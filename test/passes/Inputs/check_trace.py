"""Checks a braid-estimate Chrome trace: valid JSON, one process per rank
named 'rank r', thread tracks named per stream, complete ('X') events with
shapes and bytes on every rank. Prints a summary for FileCheck."""
import json, sys

path, ranks = sys.argv[1], int(sys.argv[2])
with open(path) as f:
    trace = json.load(f)
events = trace["traceEvents"]
procs = {e["pid"]: e["args"]["name"] for e in events
         if e["ph"] == "M" and e["name"] == "process_name"}
assert procs == {r: "rank %d" % r for r in range(ranks)}, procs
threads = sorted({e["args"]["name"] for e in events
                  if e["ph"] == "M" and e["name"] == "thread_name"})
ops = [e for e in events if e["ph"] == "X"]
per_rank = {r: [e for e in ops if e["pid"] == r] for r in range(ranks)}
counts = {len(v) for v in per_rank.values()}
assert len(counts) == 1 and counts.pop() > 0, "ranks differ or are empty"
for e in ops:
    assert e["dur"] >= 0 and e["ts"] >= 0
    assert "shapes" in e["args"] and "bytes" in e["args"], e
print("valid trace: %d ranks, tracks %s, %d ops per rank"
      % (ranks, threads, len(per_rank[0])))
print("kinds: " + ", ".join(sorted({e["name"] for e in ops})))
