"""Checks braid-run's measured profile against itself and the cost model.

Usage: check_profile.py PROFILE.csv TRACE.json ESTIMATE.json RANKS

- the trace is valid JSON: one process per rank named 'rank r', complete
  ('X') events carrying function, op index and operand shapes;
- the CSV is `op,shape,us` with one line per (op, shapes);
- braid-estimate, given the CSV as its calibration, prices prefill's
  matmuls at exactly the measured means: for each prefill matmul in the
  trace, the CSV time of its shape, summed, equals the estimate's matmul
  time (to the nanosecond rounding of each op).
"""
import csv, json, sys

profile, trace_path, estimate_path, ranks = sys.argv[1:5]
ranks = int(ranks)
with open(trace_path) as f:
    trace = json.load(f)
events = trace["traceEvents"]
procs = {e["pid"]: e["args"]["name"] for e in events
         if e["ph"] == "M" and e["name"] == "process_name"}
assert procs == {r: "rank %d" % r for r in range(ranks)}, procs
ops = [e for e in events if e["ph"] == "X"]
for e in ops:
    assert e["dur"] >= 0 and e["ts"] >= 0, e
    assert {"function", "op", "shapes"} <= set(e["args"]), e
functions = sorted({e["args"]["function"] for e in ops})

with open(profile) as f:
    rows = list(csv.reader(f))
assert rows[0] == ["op", "shape", "us"], rows[0]
means = {(r[0], r[1]): float(r[2]) for r in rows[1:]}
assert len(means) == len(rows) - 1, "duplicate (op, shape) lines"

with open(estimate_path) as f:
    estimate = json.load(f)
# The prefill step is the first one: its events come first in the trace.
prefill = [e for e in ops if e["pid"] == 0 and e["args"]["function"] == "prefill"]
first_prefill = {}
for e in prefill:
    first_prefill.setdefault(e["args"]["op"], e)
matmuls = [e for e in first_prefill.values() if e["name"] == "matmul"]
expected_ns = sum(round(means[("matmul", e["args"]["shapes"])] * 1000) for e in matmuls)
got = estimate["prefill"]["by_op"]["matmul"]
assert got["count"] == len(matmuls), (got, len(matmuls))
assert abs(got["time_ns"] - expected_ns) <= len(matmuls), (got["time_ns"], expected_ns)
print("trace: %d ranks, functions %s" % (ranks, ", ".join(functions)))
print("profile: %d (op, shape) lines" % len(means))
print("calibrated prefill matmuls: %d ops, estimate equals the measured means"
      % len(matmuls))
