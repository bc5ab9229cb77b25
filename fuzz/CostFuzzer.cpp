//===- CostFuzzer.cpp - libFuzzer target for cost-model targets -----------===//
//
// Feeds arbitrary bytes to the cost model's two file parsers, the way
// `--target=FILE.json` and `--braid-estimate="calibration=FILE.csv"` do:
//   - an input is a target JSON (parseTarget), unless its first line is
//     `#calibration`: then the rest is a calibration CSV
//     (Calibration::parse), used with the bundled h100-sxm-x8 target;
//   - what parses prices every function of a compiled module on the
//     timeline (simulate), graph and eager launch, as braid-estimate and
//     the passes that choose by price do.
//
// Findings, besides crashes and sanitizer reports (UBSan catches an int64
// overflow or a float-to-int conversion out of range):
//   - a step time, an op's seconds, bytes or FLOPs, or any timeline total
//     that is negative, NaN or infinite: every pass that compares prices
//     (sequence parallelism, decompose, schedule) would then choose by
//     garbage. Such a file must be refused by the parser, naming the field.
// Both abort with the message, so libFuzzer keeps the input.
//
// The module is compiled by braid-compile (fuzz/run-fuzz.sh cost: the tiny
// LLaMA at tp 4, forced sequence parallelism, cut into 2 chunks and
// scheduled onto two streams: matmuls, attention, norms, all_reduce_start /
// wait, reduce_scatter, all_gather), and named by BRAID_COST_FUZZ_MODULE.
// Replay a reproducer with that variable set:
//   BRAID_COST_FUZZ_MODULE=m.mlir cost-fuzzer crash-...
//
//===----------------------------------------------------------------------===//
#include "dialect/BraidDialect.h"
#include "passes/cost/CostModel.h"
#include "passes/cost/Target.h"
#include "passes/cost/Timeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

namespace {

[[noreturn]] void finding(const std::string &what) {
  std::fprintf(stderr, "cost-fuzzer: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

struct Fixture {
  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::optional<braid::cost::Target> h100;
};

Fixture &fixture() {
  static std::unique_ptr<Fixture> f = [] {
    auto made = std::make_unique<Fixture>();
    mlir::DialectRegistry registry;
    registry.insert<mlir::func::FuncDialect, mlir::braid::BraidDialect>();
    made->ctx.appendDialectRegistry(registry);
    made->ctx.loadAllAvailableDialects();
    const char *path = std::getenv("BRAID_COST_FUZZ_MODULE");
    if (!path || !*path)
      finding("set BRAID_COST_FUZZ_MODULE to a module braid-compile "
              "--emit-mlir wrote (fuzz/run-fuzz.sh cost does)");
    made->module = mlir::parseSourceFile<mlir::ModuleOp>(path, &made->ctx);
    if (!made->module)
      finding(std::string("cannot parse the module ") + path);
    auto h100 = braid::cost::resolveTarget("h100-sxm-x8");
    if (!h100)
      finding("the bundled h100-sxm-x8 target does not load: " +
              llvm::toString(h100.takeError()));
    made->h100 = std::move(*h100);
    return made;
  }();
  return *f;
}

bool finiteNonNegative(double v) { return std::isfinite(v) && v >= 0; }

void check(double v, const std::string &what, llvm::StringRef function) {
  if (!finiteNonNegative(v))
    finding(what + " of @" + function.str() + " is " + std::to_string(v) +
            " (a file that parses must price every op finite and >= 0)");
}

void price(const braid::cost::Target &target,
           const braid::cost::Calibration *calibration) {
  Fixture &f = fixture();
  for (auto launch :
       {braid::cost::LaunchMode::Graph, braid::cost::LaunchMode::Eager}) {
    braid::cost::CostModel model(target, launch, *f.module, calibration);
    // Refused by every tool (braid-estimate's error, the passes' "not
    // priced"): its collectives cost infinity by design.
    if (!model.fitProblem().empty())
      return;
    check(model.launchSeconds(), "the launch time", "module");
    for (auto func : f.module->getOps<mlir::func::FuncOp>()) {
      if (func.isExternal())
        continue;
      llvm::StringRef name = func.getSymName();
      braid::cost::Timeline t = braid::cost::simulate(func, model);
      check(t.stepTime, "the step time", name);
      check(t.serialTime, "the serial step time", name);
      check(t.computeTime, "the compute time", name);
      check(t.commTime, "the communication time", name);
      check(t.exposedComm, "the exposed communication", name);
      check(t.contention, "the contention", name);
      for (const braid::cost::TimelineEntry &e : t.entries) {
        check(e.cost.seconds, e.name + "'s seconds", name);
        check(e.cost.bytes, e.name + "'s bytes", name);
        check(e.cost.flops, e.name + "'s FLOPs", name);
        check(e.end - e.start, e.name + "'s duration", name);
      }
      double again = braid::cost::stepTime(func, model);
      if (again != t.stepTime)
        finding("stepTime of @" + name.str() + " is " + std::to_string(again) +
                " but simulate's is " + std::to_string(t.stepTime));
    }
  }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  fixture();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  if (text.starts_with("#calibration")) {
    auto calibration =
        braid::cost::Calibration::parse(text.split('\n').second, "fuzz.csv");
    if (!calibration) {
      llvm::consumeError(calibration.takeError());
      return 0;
    }
    price(*fixture().h100, &*calibration);
    return 0;
  }
  auto target = braid::cost::parseTarget(text, "fuzz.json");
  if (!target) {
    llvm::consumeError(target.takeError());
    return 0;
  }
  price(*target, nullptr);
  return 0;
}
