"""The sum of one decode step's kernel times, to set against the step's
graph replay time (issue: replay <= 1.05 x the sum of its kernel times).

Input: Nsight Compute's CSV (--csv --page raw: one row per kernel) of a
braid-run with a few timed decode steps, profiled one kernel at a time with
no cache flush and no clock lock (scripts/gpu/suite kernelsum). The decode
step is the repeating tail of the kernel sequence; its kernels' durations
are summed for each of the last three steps, and the largest are listed.
Device copies (memcpy nodes) are not kernels and are not counted."""
import csv, io, sys

text = open(sys.argv[1]).read()
rows = list(csv.DictReader(io.StringIO(text[text.find('"ID"'):])))
units = rows[0]
scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3}[units["gpu__time_duration.sum"]]
ks = [(r["Kernel Name"], float(r["gpu__time_duration.sum"].replace(",", "")) * scale)
      for r in rows[1:] if r.get("gpu__time_duration.sum")]
print("kernels profiled:", len(ks))
names = [k for k, _ in ks]
period = next((p for p in range(5, len(ks) // 3 + 1)
               if names[-p:] == names[-2 * p:-p] == names[-3 * p:-2 * p]), None)
if not period:
    sys.exit("no repeating decode step found")
sums = [sum(t for _, t in ks[len(ks) - (i + 1) * period:len(ks) - i * period]) for i in range(3)]
print(f"decode step: {period} kernels; sum of kernel times (last three steps) us: " +
      ", ".join(f"{s:.1f}" for s in sums))
top = {}
for n, t in ks[-period:]:
    key = n.split("(")[0][:70]
    top[key] = top.get(key, 0) + t
for n, t in sorted(top.items(), key=lambda x: -x[1])[:10]:
    print(f"  {t:8.1f} us  {n}")
