"""Prints MLIR text that nests N levels of one kind (test/frontend/input-nesting.test).

Each kind made MLIR's parser (or printer) recurse once per level and
overflow an 8 MB stack before the nesting bound (frontend/input/MlirNesting.h):
  modules      module { module { ... } }           (~5,000)
  arrays       {t.x = [[[...]]]}                    (~8,000)
  aliases      #a1 = [#a0]  #a2 = [#a1]  ...       (~20,000)
  type-aliases !t1 = tuple<!t0>  ...                (~20,000)
  unary-minus  affine_map<(d0) -> (----d0)>         (~8,000)
  affine-sum   affine_map<(d0)[s0] -> (d0 + s0 + ...)>  (~70,000)
  floordiv     affine_map<(d0) -> (d0 floordiv 2 ...)>  (<100,000)
N counts what the kind nests; the module or attribute around it adds one or
two levels.
"""
import sys

kind, n = sys.argv[1], int(sys.argv[2])
out = sys.stdout
if kind == "modules":
    out.write("module {" * n + "}" * n + "\n")
elif kind == "arrays":
    out.write("module attributes {t.x = " + "[" * n + "]" * n + "} {}\n")
elif kind == "aliases":
    out.write("#a0 = [1]\n")
    for i in range(1, n):
        out.write(f"#a{i} = [#a{i - 1}]\n")
    out.write(f"module attributes {{t.x = #a{n - 1}}} {{}}\n")
elif kind == "type-aliases":
    out.write("!t0 = tuple<i32>\n")
    for i in range(1, n):
        out.write(f"!t{i} = tuple<!t{i - 1}>\n")
    out.write(f"module attributes {{t.x = !t{n - 1}}} {{}}\n")
elif kind == "unary-minus":
    out.write("module attributes {t.x = affine_map<(d0) -> (" + "-" * n + "d0)>} {}\n")
elif kind == "affine-sum":
    out.write("module attributes {t.x = affine_map<(d0)[s0] -> (d0" + " + s0" * n + ")>} {}\n")
elif kind == "floordiv":
    out.write("module attributes {t.x = affine_map<(d0) -> (d0" + " floordiv 2" * n + ")>} {}\n")
else:
    sys.exit("unknown kind " + kind)
