#!/usr/bin/env python3
"""Hostile-input campaign: every tool, fed what a careless user or an
attacker would feed it, each outcome classified. Run by hand (not in CI):

  fuzz/campaign/run.sh [--build DIR] [--out DIR] [--only TOOL,...]
                       [--san-run PATH] [--timeout S] [--list]

Tools under test: BUILD/bin/{braid-import,braid-opt,braid-translate,
braid-compile,braid-run}; "plan loader" and "safetensors" are braid-run
cases whose hostile part is the plan file or the --weights checkpoint.
--san-run runs the braid-run cases with an ASan/UBSan build of braid-run
(BUILD/fuzz/braid-run-san) instead, so a memory error that does not
crash the release build still counts.

Every case runs with a wall-clock limit (--timeout, default 10 s, the
tools' own timeouts are set below it) and a 4 GiB address-space limit
(--timeout and the limit are the campaign's; a hostile input must be
refused long before either). Outcomes:

  ok          exit 0, output passes the case's check (or the case has none)
  error       a clean error: exit 1..125, a message on stderr, no signal,
              no sanitizer report, no "internal error"/"exporter bug" text
  crash       killed by a signal, a sanitizer report, an uncaught exception
              ("terminate called"), an LLVM fatal error/stack dump
  hang        killed by the campaign's time limit
  wrong       a silent wrong answer: exit 0 where the input must be
              refused, or output that fails the case's check (a negative
              byte count, NaN logits with exit 0)
  misreport   refused, but blamed on the tool ("internal error",
              "exporter bug") rather than on the input it names

Not tried: a FIFO without a writer as the input of braid-import,
braid-compile, braid-opt or braid-translate. They read their input as a
stream (stdin, `braid-import <(...)`), so such a FIFO blocks them in
open() exactly as it blocks `cat`. braid-run maps its plan and checkpoint
and must refuse a FIFO: those cases are tried.

Results: OUT/results.tsv (one line per case: tool, case, outcome, exit
status, seconds, command, first stderr line), OUT/summary.md (the table of
docs/hostile-input.md), OUT/inputs/ (every generated input, to replay a
case by hand). Deterministic: the same build gives the same inputs.
"""
import argparse
import json
import os
import random
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import time

TOOLS = ["braid-import", "braid-opt", "braid-translate", "braid-compile",
         "braid-run", "plan loader", "safetensors"]
OUTCOMES = ["ok", "error", "crash", "hang", "wrong", "misreport"]
MEM_LIMIT = 4 << 30

CRASH_TEXT = re.compile(
    r"AddressSanitizer|UndefinedBehaviorSanitizer|LeakSanitizer|"
    r"runtime error:|terminate called|Stack dump:|"
    r"PLEASE submit a bug report|Assertion .* failed|Segmentation fault|"
    r"Floating point exception|Aborted")
MISREPORT_TEXT = re.compile(r"internal error|exporter bug", re.I)


class Campaign:
    def __init__(self, args):
        self.build = os.path.abspath(args.build)
        self.root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
        self.out = os.path.abspath(args.out)
        self.inputs = os.path.join(self.out, "inputs")
        self.timeout = args.timeout
        self.only = set(args.only.split(",")) if args.only else None
        self.bin = {t: os.path.join(self.build, "bin", t) for t in
                    ["braid-import", "braid-opt", "braid-translate",
                     "braid-compile", "braid-run"]}
        if args.san_run:
            self.bin["braid-run"] = os.path.abspath(args.san_run)
        self.cases = []  # (tool, name, argv, expect, check, stdin)
        self.results = []
        self.list_only = args.list

    # -- helpers ---------------------------------------------------------
    def path(self, name):
        return os.path.join(self.inputs, name)

    def write(self, name, data):
        p = self.path(name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        return p

    def add(self, tool, name, argv, expect="any", check=None):
        """expect: 'error' (must be refused), 'ok' (must succeed), 'any'."""
        if self.only and tool not in self.only:
            return
        self.cases.append((tool, name, argv, expect, check))

    def run_tool(self, argv, timeout=None):
        """Runs argv with the limits; returns (rc, out, err, secs, hung)."""
        def limits():
            resource.setrlimit(resource.RLIMIT_AS, (MEM_LIMIT, MEM_LIMIT))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            os.setsid()
        env = dict(os.environ)
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        start = time.monotonic()
        # A tool under ASan cannot start under an address-space limit.
        pre = None if "-san" in argv[0] else limits
        try:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, preexec_fn=pre or os.setsid,
                                 env=env, cwd=self.inputs)
        except OSError as e:
            return 127, b"", str(e).encode(), 0.0, False
        try:
            out, err = p.communicate(timeout=timeout or self.timeout)
            hung = False
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            hung = True
        return p.returncode, out, err, time.monotonic() - start, hung

    def classify(self, rc, out, err, hung, expect, check):
        text = err.decode("utf-8", "replace")
        if hung:
            return "hang"
        if rc < 0 or rc >= 128 or CRASH_TEXT.search(text):
            return "crash"
        if rc == 0:
            if expect == "error":
                return "wrong"
            if check:
                problem = check(out.decode("utf-8", "replace"), text)
                if problem:
                    return "wrong"
            return "ok"
        if MISREPORT_TEXT.search(text):
            return "misreport"
        return "error"

    # -- inputs ----------------------------------------------------------
    def setup(self):
        if os.path.exists(self.out):
            shutil.rmtree(self.out)
        os.makedirs(self.inputs)
        for t, b in self.bin.items():
            if not os.access(b, os.X_OK):
                sys.exit(f"campaign: {b} is missing: build the default target first")
        # Special files every path-taking flag is tried with.
        os.mkfifo(self.path("fifo"))
        os.makedirs(self.path("a-directory"))
        self.write("empty", b"")
        self.write("garbage", bytes(random.Random(7).randrange(256) for _ in range(4096)))
        self.specials = {
            "directory": self.path("a-directory"),
            "fifo": self.path("fifo"),
            "missing": self.path("no-such-file"),
            "empty": self.path("empty"),
            "garbage": self.path("garbage"),
            "dev-zero": "/dev/zero",
            "dev-null": "/dev/null",
        }

    def compile_plan(self, name, *flags):
        p = self.path(name)
        rc, _, err, _, _ = self.run_tool(
            [self.bin["braid-compile"], *flags, "-o", p], timeout=120)
        if rc != 0:
            sys.exit(f"campaign: braid-compile {' '.join(flags)} failed: {err.decode()}")
        return p

    # -- generators --------------------------------------------------------
    def hostile_numbers(self):
        return [0, -1, 1, 3, 7, 2**31, 2**32, 2**32 + 2, 2**53 + 1,
                2**62, 2**63 - 1, 2**63, 2**64, 1.5, 1e308, -1e308,
                "64", None, True, [], {}]

    def configs(self):
        """Hostile config.json files: (name, path)."""
        out = []
        bases = {
            "llama": json.load(open(os.path.join(self.root, "models/tiny-llama/config.json"))),
            "gpt2": json.load(open(os.path.join(self.root, "test/frontend/Inputs/tiny-gpt2.json"))),
        }
        for bname, base in bases.items():
            out.append((f"{bname}-valid", self.write(f"cfg/{bname}-valid.json", json.dumps(base))))
            for key, value in base.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    for i, v in enumerate(self.hostile_numbers()):
                        c = dict(base)
                        c[key] = v
                        n = f"{bname}-{key}-{i}"
                        out.append((n, self.write(f"cfg/{n}.json", json.dumps(c))))
                c = dict(base)
                del c[key]
                n = f"{bname}-no-{key}"
                out.append((n, self.write(f"cfg/{n}.json", json.dumps(c))))
            for i, mt in enumerate(["", "bert", 5, None, "LLAMA", "llama\u0000x"]):
                c = dict(base)
                c["model_type"] = mt
                n = f"{bname}-model-type-{i}"
                out.append((n, self.write(f"cfg/{n}.json", json.dumps(c))))
        llama = json.dumps(bases["llama"])
        structural = {
            "empty-object": "{}",
            "array": "[]",
            "null": "null",
            "number": "42",
            "unterminated": llama[:len(llama) // 2],
            "trailing-comma": llama[:-1] + ",}",
            "nan-literal": llama.replace('"rms_norm_eps": 1e-05', '"rms_norm_eps": NaN'),
            "bom": "\ufeff" + llama,
            "duplicate-keys": llama[:-1] + ', "hidden_size": 128}',
            "nested-arrays-40000": "[" * 40000 + "]" * 40000,
            "nested-objects-40000": '{"a":' * 40000 + "1" + "}" * 40000,
            "nested-value-40000": llama[:-1] + ', "x": ' + "[" * 40000 + "]" * 40000 + "}",
            "huge-string-16M": llama[:-1] + ', "x": "' + "a" * (16 << 20) + '"}',
            "utf16": llama.encode("utf-16").decode("latin-1"),
            "layers-1e12": llama.replace('"num_hidden_layers": 2', '"num_hidden_layers": 1000000000000'),
            "layers-1e5": llama.replace('"num_hidden_layers": 2', '"num_hidden_layers": 100000'),
            "vocab-1e15": llama.replace('"vocab_size": 256', '"vocab_size": 1000000000000000'),
            "hidden-2^40": llama.replace('"hidden_size": 64', '"hidden_size": 1099511627776')
                                .replace('"intermediate_size": 128', '"intermediate_size": 1099511627776'),
            "heads-exceed-hidden": llama.replace('"num_attention_heads": 8', '"num_attention_heads": 128'),
            "kv-heads-not-dividing": llama.replace('"num_key_value_heads": 4', '"num_key_value_heads": 3'),
        }
        for n, text in structural.items():
            data = text.encode("latin-1") if n == "utf16" else text.encode()
            out.append((n, self.write(f"cfg/{n}.json", data)))
        for n in ["directory", "missing", "empty", "garbage", "dev-zero"]:
            out.append((n, self.specials[n]))
        return out

    def gen_frontend(self):
        imp, comp = self.bin["braid-import"], self.bin["braid-compile"]
        for name, path in self.configs():
            must = "ok" if name.endswith("-valid") else "any"
            if name in ("directory", "missing", "empty", "garbage",
                        "dev-zero", "array", "null", "number", "unterminated",
                        "trailing-comma", "nan-literal", "nested-arrays-40000",
                        "nested-objects-40000", "nested-value-40000",
                        "layers-1e12", "vocab-1e15", "hidden-2^40"):
                must = "error"
            self.add("braid-import", f"config {name}",
                     [imp, path, "--stats", "--seq", "4", "--max-seq", "8"],
                     must, check_stats)
            self.add("braid-compile", f"config {name}",
                     [comp, path, "--seq", "4", "--max-seq", "8", "-o",
                      self.path("out.bplan")], must)
        flags = {
            "tp-0": ["--tp", "0"], "tp--1": ["--tp", "-1"], "tp-3": ["--tp", "3"],
            "tp-2^31": ["--tp", str(2**31)], "tp-2^32+2": ["--tp", str(2**32 + 2)],
            "tp-max": ["--tp", str(2**63 - 1)], "tp-x": ["--tp", "x"],
            "tp-overflow": ["--tp", "99999999999999999999"],
            "batch-0": ["--batch", "0"], "batch--1": ["--batch", "-1"],
            "batch-2^40": ["--batch", str(2**40)], "batch-max": ["--batch", str(2**63 - 1)],
            "seq-0": ["--seq", "0"], "seq--1": ["--seq", "-1"],
            "seq-2^40": ["--seq", str(2**40)], "seq-max": ["--seq", str(2**63 - 1)],
            "seq-gt-max-seq": ["--seq", "16", "--max-seq", "8"],
            "max-seq--1": ["--max-seq", "-1"], "max-seq-2^62": ["--max-seq", str(2**62)],
            "max-seq-max": ["--max-seq", str(2**63 - 1)],
            "dtype-int8": ["--dtype", "int8"], "dtype-empty": ["--dtype", ""],
            "unknown-flag": ["--no-such-flag"],
            "output-directory": ["-o", self.specials["directory"]],
            "output-missing-dir": ["-o", self.path("no/such/dir/x")],
            "output-dev-full": ["-o", "/dev/full"],
        }
        must_fail = {"tp-0", "tp--1", "tp-3", "tp-2^31", "tp-2^32+2", "tp-max",
                     "tp-x", "tp-overflow", "batch-0", "batch--1", "batch-max",
                     "seq-0", "seq--1", "seq-max", "seq-gt-max-seq", "max-seq--1",
                     "max-seq-max", "dtype-int8", "dtype-empty", "unknown-flag",
                     "output-directory", "output-missing-dir", "output-dev-full"}
        for n, f in flags.items():
            must = "error" if n in must_fail else "any"
            base = [] if any(x in ("--seq", "--max-seq") for x in f) else ["--seq", "4", "--max-seq", "8"]
            if not n.startswith("output"):
                self.add("braid-import", f"flag {n}", [imp, "--stats", *base, *f], must, check_stats)
            self.add("braid-compile", f"flag {n}",
                     [comp, *base, *f] + ([] if n.startswith("output") else ["-o", self.path("out.bplan")]),
                     must)

    def mlir_cases(self):
        """Hostile braid IR: (name, path, must_fail)."""
        base = subprocess.run([self.bin["braid-import"], "--tp", "2", "--seq", "4",
                               "--max-seq", "8", "--dtype", "fp32"],
                              capture_output=True, text=True, check=True).stdout
        out = [("valid-tp2", self.write("ir/valid.mlir", base), False)]
        grp = "braid.device_group @tp size 2"
        for v in ["0", "-1", "3", "4294967298", "2147483648", "9223372036854775807", "99999999999999999999"]:
            out.append((f"group-size-{v}", self.write(f"ir/group-{v}.mlir", base.replace(grp, f"braid.device_group @tp size {v}")), v != "3"))
        sl = "braid.slice %arg1 offsets [0, 0] sizes [1, 1]"
        for i, (o, s) in enumerate([("[0, 9223372036854775807]", "[1, 1]"),
                                    ("[0, 3]", "[1, 9223372036854775807]"),
                                    ("[0, -1]", "[1, 1]"), ("[0, 4]", "[1, 1]"),
                                    ("[9223372036854775807, 9223372036854775807]", "[1, 1]")]):
            t = base.replace(sl, f"braid.slice %arg1 offsets {o} sizes {s}", 1)
            out.append((f"slice-{i}", self.write(f"ir/slice-{i}.mlir", t), True))

        def fn(body, args, results):
            return (f"braid.device_group @tp size 2\nfunc.func @main({args}) -> ({results}) {{\n"
                    f"{body}\n}}\n")
        small = {
            "reshape-overflow": fn(
                "  %0 = braid.reshape %a : tensor<4294967296x4294967297xf32> -> tensor<4294967296xf32>\n"
                "  return %0 : tensor<4294967296xf32>",
                "%a: tensor<4294967296x4294967297xf32> {braid.input = \"x\"}",
                "tensor<4294967296xf32> {braid.output = \"y\"}"),
            "concat-overflow": fn(
                "  %0 = braid.concat %a, %a dim 0 : (tensor<9223372036854775807xf32>, tensor<9223372036854775807xf32>) -> tensor<2xf32>\n"
                "  return %0 : tensor<2xf32>",
                "%a: tensor<9223372036854775807xf32> {braid.input = \"x\"}",
                "tensor<2xf32> {braid.output = \"y\"}"),
            "huge-tensor": fn(
                "  %0 = braid.add %a, %a : (tensor<9223372036854775807x2xf32>, tensor<9223372036854775807x2xf32>) -> tensor<9223372036854775807x2xf32>\n"
                "  return %0 : tensor<9223372036854775807x2xf32>",
                "%a: tensor<9223372036854775807x2xf32> {braid.input = \"x\"}",
                "tensor<9223372036854775807x2xf32> {braid.output = \"y\"}"),
            "duplicate-inputs": fn(
                "  %0 = braid.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
                "  return %0 : tensor<4xf32>",
                "%a: tensor<4xf32> {braid.input = \"x\"}, %b: tensor<4xf32> {braid.input = \"x\"}",
                "tensor<4xf32> {braid.output = \"y\"}"),
            "all-reduce-unknown-group": fn(
                "  %0 = braid.all_reduce sum %a on @nope : tensor<4xf32> -> tensor<4xf32>\n"
                "  return %0 : tensor<4xf32>",
                "%a: tensor<4xf32> {braid.input = \"x\"}", "tensor<4xf32> {braid.output = \"y\"}"),
        }
        for ety in ["index", "complex<f32>", "vector<4xf32>", "i1", "f64", "f8E4M3FN", "i128", "!braid.event"]:
            small[f"elt-{ety}"] = fn(
                f"  %0 = braid.add %a, %a : (tensor<4x{ety}>, tensor<4x{ety}>) -> tensor<4x{ety}>\n"
                f"  return %0 : tensor<4x{ety}>",
                f"%a: tensor<4x{ety}> {{braid.input = \"x\"}}", f"tensor<4x{ety}> {{braid.output = \"y\"}}")
        for n, text in small.items():
            out.append((n, self.write(f"ir/{n}.mlir", text), True))
        # Streams: a scheduled op with a hostile stream id.
        for v in ["-1", "2000000000", "4294967296"]:
            t = fn("  %0 = braid.add %a, %a {braid.stream = " + v + " : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
                   "  return %0 : tensor<4xf32>",
                   "%a: tensor<4xf32> {braid.input = \"x\"}", "tensor<4xf32> {braid.output = \"y\"}")
            out.append((f"stream-{v}", self.write(f"ir/stream-{v}.mlir", t), True))
        # Attribute sweep: each kind of number in the imported IR, its first
        # occurrences replaced one at a time by hostile values.
        patterns = {
            "num_heads": (r"num_heads = (\d+) : i64", ["0", "-1", "3", "4294967298", "9223372036854775807"]),
            "num_kv_heads": (r"num_kv_heads = (\d+) : i64", ["0", "-1", "3", "9223372036854775807"]),
            "head_dim": (r"head_dim = (\d+) : i64", ["0", "-8", "4294967304", "9223372036854775807"]),
            "epsilon": (r"epsilon = ([0-9.e+-]+) : f64", ["-1.0", "0x7FF8000000000000", "0x7FF0000000000000", "1.0e308"]),
            "theta": (r"theta = ([0-9.e+-]+) : f64", ["0.0", "-1.0", "0x7FF8000000000000", "0x7FF0000000000000"]),
            "full-shape": (r"full \[(\d+), \d+\]", ["0", "-1", "4294967296", "9223372036854775807"]),
            "shard_dim": (r"shard_dim (\d+)", ["1", "2", "7", "-1", "4294967296"]),
            "gather-dim": (r"dim (\d+)", ["0", "3", "-1", "9223372036854775807"]),
        }
        for kind, (pattern, values) in patterns.items():
            for k, m in enumerate(list(re.finditer(pattern, base))[:2]):
                for v in values:
                    t = base[:m.start(1)] + v + base[m.end(1):]
                    n = f"attr-{kind}-{k}-{v}"
                    out.append((n, self.write(f"ir/{n}.mlir", t), False))
        # A generation plan that multiplies an empty tensor with a huge other
        # dim (0 elements pass element-count limits); also compiled and run
        # by braid-run in gen_runtime when the compiler accepts it.
        for big in ["1090921693184", "4294967298", "22906492245"]:
            ir = open(os.path.join(self.root, "fuzz/campaign/empty-tensor-huge-dim.mlir")).read()
            out.append((f"empty-tensor-{big}x0x8", self.write(f"ir/empty-case-{big}.mlir", ir.replace("1090921693184", big)), False))
        out.append(("nested-attr-20000", self.write("ir/nested-attr.mlir",
                    "module attributes {x = " + "[" * 20000 + "]" * 20000 + "} {}\n"), False))
        out.append(("binary-garbage", self.specials["garbage"], True))
        for n in ["directory", "missing", "empty", "dev-zero"]:
            out.append((n, self.specials[n], n != "empty"))
        return out

    def gen_compiler(self):
        opt, tr = self.bin["braid-opt"], self.bin["braid-translate"]
        for name, path, must_fail in self.mlir_cases():
            must = "error" if must_fail else "any"
            self.add("braid-opt", f"ir {name} (verify)", [opt, path, "-o", os.devnull], must)
            self.add("braid-opt", f"ir {name} (default pipeline)",
                     [opt, path, "--braid-default-pipeline", "-o", os.devnull], must)
            self.add("braid-opt", f"ir {name} (estimate)",
                     [opt, path, "--braid-estimate", "-o", os.devnull], must)
            self.add("braid-translate", f"ir {name} (to plan)",
                     [tr, path, "--braid-to-plan", "-o", self.path("tr.bplan")], must)
        # Scheduled IR (after the default pipeline) with its numbers changed.
        base = self.path("ir/valid.mlir")
        sched = subprocess.run([opt, base, "--braid-default-pipeline"],
                               capture_output=True, text=True, check=True).stdout
        self.write("ir/scheduled.mlir", sched)
        muts = {}
        for m in re.finditer(r"(offset|size|arena_size|braid\.arena_size)\s*=\s*(\d+)", sched):
            key = m.group(1)
            if len([k for k in muts if k.startswith(key)]) >= 2:
                continue
            for v in ["-8", "9223372036854775807", "4294967296"]:
                muts[f"{key}-{m.start()}-{v}"] = sched[:m.start(2)] + v + sched[m.end(2):]
        for n, text in muts.items():
            p = self.write(f"ir/sched-{n}.mlir", text)
            self.add("braid-translate", f"scheduled {n}", [tr, p, "--braid-to-plan", "-o", self.path("tr.bplan")])
        # Hostile plans back to text.
        for n in ["directory", "missing", "empty", "garbage", "dev-zero"]:
            self.add("braid-translate", f"plan-to-text {n}",
                     [tr, self.specials[n], "--plan-to-text", "-o", os.devnull], "error")

    def gen_runtime(self):
        run = self.bin["braid-run"]
        tp1 = self.compile_plan("plan-tp1.bplan", "--tp", "1", "--dtype", "fp32", "--seq", "4", "--max-seq", "8")
        tp2 = self.compile_plan("plan-tp2.bplan", "--tp", "2", "--dtype", "fp32", "--seq", "4", "--max-seq", "8")
        gpt2 = self.compile_plan("plan-gpt2.bplan", os.path.join(self.root, "test/frontend/Inputs/tiny-gpt2.json"),
                                 "--tp", "1", "--seq", "4", "--max-seq", "8")
        common = ["--steps", "2", "--timeout", "5"]
        # -- plan loader: mutated plan bytes --------------------------------
        rng = random.Random(15)
        for base_name, base in [("tp1", tp1), ("tp2", tp2)]:
            data = open(base, "rb").read()
            for i in range(150):
                b = bytearray(data)
                for _ in range(rng.choice([1, 1, 1, 2, 4])):
                    pos = rng.randrange(len(b))
                    b[pos] = rng.choice([b[pos] ^ (1 << rng.randrange(8)), 0, 0xff, rng.randrange(256)])
                p = self.write(f"plan/{base_name}-flip-{i}.bplan", bytes(b))
                self.add("plan loader", f"{base_name} byte flips {i}", [run, p, *common], "any", check_logits)
            for i, cut in enumerate([0, 4, 8, 16, len(data) // 4, len(data) // 2, len(data) - 8, len(data) - 1]):
                p = self.write(f"plan/{base_name}-cut-{i}.bplan", data[:cut])
                # The last bytes may be FlatBuffers padding: without them the
                # plan is still whole, and may load.
                must = "any" if cut >= len(data) - 8 else "error"
                self.add("plan loader", f"{base_name} truncated to {cut} bytes", [run, p, *common], must, check_logits)
            for i in range(8):
                b = bytearray(data)
                start = rng.randrange(len(b) - 64)
                b[start:start + 64] = bytes(64)
                p = self.write(f"plan/{base_name}-zero-{i}.bplan", bytes(b))
                self.add("plan loader", f"{base_name} zeroed 64 bytes {i}", [run, p, *common], "any", check_logits)
            p = self.write(f"plan/{base_name}-appended.bplan", data + b"\0" * 1024)
            self.add("plan loader", f"{base_name} with 1 KiB appended", [run, p, *common], "any", check_logits)
            # Every 32-bit little-endian field equal to the world size, set to
            # 65538 and to -1 (the bit flip the issue describes).
            world = 1 if base_name == "tp1" else 2
            needle = struct.pack("<i", world)
            hits = [m.start() for m in re.finditer(re.escape(needle), data)][:12]
            for j, pos in enumerate(hits):
                for v in [65538, -1, 0]:
                    b = bytearray(data)
                    b[pos:pos + 4] = struct.pack("<i", v)
                    p = self.write(f"plan/{base_name}-int-{j}-{v}.bplan", bytes(b))
                    self.add("plan loader", f"{base_name} int field {j} = {v}", [run, p, *common], "any", check_logits)
        for n in ["directory", "fifo", "missing", "empty", "garbage", "dev-zero", "dev-null"]:
            self.add("plan loader", f"plan is {n}", [run, self.specials[n], *common], "error")
        # Compiled plans with empty tensors whose other dims are huge (0
        # elements pass every element-count limit).
        for n, path in self.empty_tensor_plans():
            self.add("plan loader", n, [run, path, *common])

        # -- braid-run flags -------------------------------------------------
        flags = {
            "ranks-3": (tp2, ["--ranks", "3"]), "ranks-65538": (tp2, ["--ranks", "65538"]),
            "steps--1": (tp1, ["--steps", "-1"]), "steps-2^40": (tp1, ["--steps", str(2**40)]),
            "steps-x": (tp1, ["--steps", "x"]),
            "tokens-out-of-vocab": (tp1, ["--tokens", "1,2,3,999999"]),
            "tokens-negative": (tp1, ["--tokens", "1,2,3,-4"]),
            "tokens-too-few": (tp1, ["--tokens", "1,2"]),
            "tokens-garbage": (tp1, ["--tokens", "a,b,c,d"]),
            "tokens-overflow": (tp1, ["--tokens", "1,2,3,99999999999999999999"]),
            "timeout-0": (tp1, ["--timeout", "0"]), "timeout--1": (tp1, ["--timeout", "-1"]),
            "timeout-nan": (tp1, ["--timeout", "nan"]), "timeout-1e300": (tp1, ["--timeout", "1e300"]),
            "seed--1": (tp1, ["--seed", "-1"]), "prompt-seed-huge": (tp1, ["--prompt-seed", "99999999999999999999999"]),
            "strict-seed-x": (tp1, ["--strict", "--strict-seed", "x"]),
            "backend-tpu": (tp1, ["--backend", "tpu"]),
            "backend-cuda-no-gpu": (tp1, ["--backend", "cuda"]),
            "check-against-directory": (tp1, ["--check-against", self.specials["directory"]]),
            "check-against-fifo": (tp1, ["--check-against", self.specials["fifo"]]),
            "check-against-other-model": (tp1, ["--check-against", gpt2]),
            "check-against-garbage": (tp1, ["--check-against", self.specials["garbage"]]),
            "dump-outputs-directory": (tp1, ["--dump-outputs", self.specials["directory"]]),
            "dump-outputs-dev-full": (tp1, ["--dump-outputs", "/dev/full"]),
            "profile-missing-dir": (tp1, ["--profile", self.path("no/such/p.csv")]),
            "trace-dev-full": (tp1, ["--trace", "/dev/full"]),
            "unknown-flag": (tp1, ["--no-such-flag"]),
            "flag-missing-value": (tp1, ["--steps"]),
        }
        for n, (plan, f) in flags.items():
            must = "any" if n in ("seed--1", "timeout-1e300", "check-against-other-model") else "error"
            base = common
            if f[0] == "--steps":
                base = ["--timeout", "5"]
            elif f[0] == "--timeout":
                base = ["--steps", "2"]
            self.add("braid-run", f"flag {n}", [run, plan, *base, *f], must, check_logits)
        self.add("braid-run", "valid tp1", [run, tp1, *common], "ok", check_logits)
        self.add("braid-run", "valid tp2 strict", [run, tp2, *common, "--strict"], "ok", check_logits)
        self.add("braid-run", "valid tp2 --check-against tp1", [run, tp2, *common, "--check-against", tp1], "ok", check_logits)

        # -- safetensors: hostile --weights ----------------------------------
        listing = subprocess.run([run, tp1, "--print-plan"], capture_output=True, text=True).stdout
        params = []
        for line in listing.splitlines():
            m = re.match(r'\s*param \d+ "([^"]+)" \S+ \S+ full (\S+)', line)
            if m:
                params.append((m.group(1), [int(d) for d in m.group(2).split("x")]))
        if not params:
            sys.exit("campaign: braid-run --print-plan listed no parameters")
        for n, blob in checkpoints(params):
            p = self.write(f"ckpt/{n}.safetensors", blob)
            must = "ok" if n.startswith("valid") else "error"
            if n.startswith("maybe-"):
                must = "any"
            self.add("safetensors", f"checkpoint {n}", [run, tp1, *common, "--weights", p], must, check_logits)
        for n in ["directory", "fifo", "missing", "empty", "garbage", "dev-zero", "dev-null"]:
            self.add("safetensors", f"checkpoint is {n}", [run, tp1, *common, "--weights", self.specials[n]], "error")

    def empty_tensor_plans(self):
        """(name, plan) compiled by braid-opt + braid-translate from IR whose
        empty tensors have huge other dims; a case is skipped (and says so)
        when the compiler refuses its IR, which is a fine outcome too."""
        out = []
        # 22906492245 x 48 is just under the 2^40 bound of ccb578a.
        for big in ["1090921693184", "4294967298", "22906492245"]:
            ir = open(os.path.join(self.root, "fuzz/campaign/empty-tensor-huge-dim.mlir")).read()
            ir = ir.replace("1090921693184", big)
            src = self.write(f"ir/empty-{big}.mlir", ir)
            plan = self.path(f"plan/empty-{big}.bplan")
            sched = subprocess.run([self.bin["braid-opt"], src, "--braid-default-pipeline"],
                                   capture_output=True, text=True)
            if sched.returncode != 0:
                print(f"campaign: braid-opt refuses empty-{big}.mlir (not run): "
                      f"{sched.stderr.strip().splitlines()[0] if sched.stderr.strip() else ''}",
                      file=sys.stderr)
                continue
            self.write(f"ir/empty-{big}.sched.mlir", sched.stdout)
            tr = subprocess.run([self.bin["braid-translate"], self.path(f"ir/empty-{big}.sched.mlir"),
                                 "--braid-to-plan", "-o", plan], capture_output=True, text=True)
            if tr.returncode != 0:
                print(f"campaign: braid-translate refuses empty-{big}.mlir (not run)", file=sys.stderr)
                continue
            out.append((f"compiled plan: matmul over an empty {big}x0x8 tensor", plan))
        return out

    # -- driver --------------------------------------------------------------
    def run(self):
        self.setup()
        if not self.only or self.only & {"braid-import", "braid-compile"}:
            self.gen_frontend()
        if not self.only or self.only & {"braid-opt", "braid-translate"}:
            self.gen_compiler()
        if not self.only or self.only & {"braid-run", "plan loader", "safetensors"}:
            self.gen_runtime()
        if self.list_only:
            for tool, name, argv, expect, _ in self.cases:
                print(f"{tool}\t{name}\t{expect}\t{' '.join(argv)}")
            return 0
        tsv = open(os.path.join(self.out, "results.tsv"), "w")
        tsv.write("tool\tcase\toutcome\texit\tseconds\tcommand\tmessage\n")
        t0 = time.monotonic()
        for i, (tool, name, argv, expect, check) in enumerate(self.cases):
            rc, out, err, secs, hung = self.run_tool(argv)
            outcome = self.classify(rc, out, err, hung, expect, check)
            msg = err.decode("utf-8", "replace").strip().splitlines()
            first = next((l for l in msg if l.strip()), "")[:300]
            if outcome == "wrong" and check:
                first = (check(out.decode("utf-8", "replace"), err.decode("utf-8", "replace")) or "exit 0") + " | " + first
            elif outcome == "wrong":
                first = "exit 0 on input that must be refused | " + first
            self.results.append((tool, name, outcome, rc, secs, argv, first))
            tsv.write(f"{tool}\t{name}\t{outcome}\t{rc}\t{secs:.2f}\t{' '.join(argv)}\t{first}\n")
            tsv.flush()
            if outcome in ("crash", "hang", "wrong", "misreport"):
                print(f"[{i + 1}/{len(self.cases)}] {tool}: {name}: {outcome.upper()} (exit {rc}, {secs:.1f}s) {first[:160]}",
                      flush=True)
        tsv.close()
        self.summary(time.monotonic() - t0)
        bad = [r for r in self.results if r[2] in ("crash", "hang", "wrong", "misreport")]
        return 1 if bad else 0

    def summary(self, seconds):
        lines = ["| tool | inputs | ok | clean errors | crashes | hangs | silent wrong | misreported |",
                 "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        total = {o: 0 for o in OUTCOMES}
        for tool in TOOLS:
            rs = [r for r in self.results if r[0] == tool]
            if not rs:
                continue
            c = {o: sum(1 for r in rs if r[2] == o) for o in OUTCOMES}
            for o in OUTCOMES:
                total[o] += c[o]
            lines.append(f"| {tool} | {len(rs)} | {c['ok']} | {c['error']} | {c['crash']} | "
                         f"{c['hang']} | {c['wrong']} | {c['misreport']} |")
        lines.append(f"| **all** | {len(self.results)} | {total['ok']} | {total['error']} | "
                     f"{total['crash']} | {total['hang']} | {total['wrong']} | {total['misreport']} |")
        bad = [r for r in self.results if r[2] in ("crash", "hang", "wrong", "misreport")]
        text = "\n".join(lines) + f"\n\n{len(self.results)} cases in {seconds:.0f} s.\n"
        if bad:
            text += "\nNot clean:\n\n"
            for tool, name, outcome, rc, secs, argv, first in bad:
                text += f"- {tool}: {name}: **{outcome}** (exit {rc}, {secs:.1f} s): `{first[:200]}`\n"
        open(os.path.join(self.out, "summary.md"), "w").write(text)
        print(text)


def check_stats(out, err):
    """braid-import --stats: no byte or FLOP count may be negative."""
    for line in out.splitlines():
        if re.search(r"(?<![\w.])-\d", line) and not line.lstrip().startswith(("%", "func", "module", "braid")):
            return f"negative number in --stats: {line.strip()[:120]}"
    return None


def check_logits(out, err):
    """braid-run exit 0: the logits and tokens it reports must be finite."""
    if re.search(r"\b(nan|-?inf)\b", out, re.I):
        return "exit 0 with non-finite numbers in the report"
    return None


def st_file(header, data, pad=True, raw_header=None):
    text = raw_header if raw_header is not None else json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def checkpoints(params):
    """Hostile safetensors files for the parameters [(name, full shape)]."""
    rng = random.Random(13)

    def build(mutate=None, dtype="F32", value=None):
        header, data = {}, bytearray()
        for name, shape in params:
            n = 1
            for d in shape:
                n *= d
            base = 1.0 if "norm" in name else 0.0
            vals = [base + rng.uniform(-0.05, 0.05) for _ in range(n)]
            if value is not None and name == params[-1][0]:
                vals = [value] * n
            blob = b"".join(struct.pack("<f", v) for v in vals)
            if dtype == "BF16":
                blob = b"".join(blob[i + 2:i + 4] for i in range(0, len(blob), 4))
            header[name] = {"dtype": dtype, "shape": list(shape),
                            "data_offsets": [len(data), len(data) + len(blob)]}
            data += blob
        if mutate:
            mutate(header, data)
        return header, bytes(data)

    out = []
    h, d = build()
    out.append(("valid-f32", st_file(h, d)))
    h2, d2 = build(dtype="BF16")
    out.append(("valid-bf16", st_file(h2, d2)))
    first, second = params[0][0], params[1][0]
    for v, n in [(float("nan"), "nan"), (float("inf"), "inf"), (3e38, "huge-3e38")]:
        hh, dd = build(value=v)
        out.append((f"values-{n}", st_file(hh, dd)))

    def m(fn):
        hh, dd = build()
        fn(hh, dd)
        return hh, dd

    def overlap(hh, dd):
        hh[second]["data_offsets"] = list(hh[first]["data_offsets"])
        hh[second]["shape"] = list(hh[first]["shape"])
    out.append(("maybe-overlapping-offsets", st_file(*m(overlap))))
    cases = {
        "offsets-past-end": lambda hh, dd: hh[first].update(data_offsets=[0, len(dd) + 4]),
        "offsets-reversed": lambda hh, dd: hh[first].update(data_offsets=[8, 0]),
        "offsets-2^64": lambda hh, dd: hh[first].update(data_offsets=[0, 2**64 - 1]),
        "offsets-negative": lambda hh, dd: hh[first].update(data_offsets=[-4, 0]),
        "offsets-float": lambda hh, dd: hh[first].update(data_offsets=[0.5, 4]),
        "shape-negative": lambda hh, dd: hh[first].update(shape=[-1, 4]),
        "shape-overflow": lambda hh, dd: hh[first].update(shape=[2**32, 2**32, 2**32]),
        "shape-wrong": lambda hh, dd: hh[first].update(shape=[1, hh[first]["data_offsets"][1] // 4 - hh[first]["data_offsets"][0] // 4]),
        "shape-not-array": lambda hh, dd: hh[first].update(shape="8x8"),
        "dtype-I64": lambda hh, dd: hh[first].update(dtype="I64", shape=[(hh[first]["data_offsets"][1] - hh[first]["data_offsets"][0]) // 8]),
        "dtype-unknown": lambda hh, dd: hh[first].update(dtype="F4"),
        "dtype-number": lambda hh, dd: hh[first].update(dtype=4),
        "entry-not-object": lambda hh, dd: hh.update({first: [1, 2]}),
        "missing-tensor": lambda hh, dd: hh.pop(first),
        "extra-tensor": lambda hh, dd: hh.update({"extra": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}}),
        "metadata-nested": lambda hh, dd: hh.update({"__metadata__": {"a": [[[[1]]]]}}),
    }
    for n, fn in cases.items():
        must = "maybe-" if n in ("extra-tensor", "metadata-nested") else ""
        out.append((f"{must}{n}", st_file(*m(fn))))
    # Duplicate names: the same key twice in the header text.
    hh, dd = build()
    text = json.dumps(hh, separators=(",", ":"))
    entry = json.dumps({first: hh[first]}, separators=(",", ":"))[1:-1]
    out.append(("duplicate-names", st_file(None, dd, raw_header=(text[:-1] + "," + entry + "}").encode())))
    hh, dd = build()
    good = st_file(hh, dd)
    out.append(("header-length-huge", struct.pack("<Q", 2**63) + good[8:]))
    out.append(("header-length-2^64-1", struct.pack("<Q", 2**64 - 1) + good[8:]))
    out.append(("header-length-zero", struct.pack("<Q", 0) + good[8:]))
    out.append(("truncated-data", good[:len(good) - 16]))
    out.append(("truncated-header", good[:20]))
    out.append(("header-not-json", st_file(None, b"", raw_header=b"{not json")))
    out.append(("header-array", st_file(None, b"", raw_header=b"[]")))
    out.append(("header-nested-40000", st_file(None, b"", raw_header=b"[" * 40000 + b"]" * 40000)))
    out.append(("header-huge-string", st_file(None, b"", raw_header=b'{"a":"' + b"x" * (8 << 20) + b'"}')))
    out.append(("header-only-8-bytes", struct.pack("<Q", 0)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "..", "build"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", default="", help="comma-separated tools (see TOOLS)")
    ap.add_argument("--san-run", default="", help="braid-run to use for the runtime cases (e.g. an ASan build)")
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--list", action="store_true", help="print the cases, run nothing")
    args = ap.parse_args()
    if args.out is None:
        args.out = os.path.join(args.build, "campaign")
    return Campaign(args).run()


if __name__ == "__main__":
    sys.exit(main())
