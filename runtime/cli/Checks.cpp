//===- Checks.cpp - braid-run's --check and --check-against ---------------===//
#include "runtime/cli/Checks.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>

namespace braid::rt::cli {
namespace {

struct Tolerance {
  double atol = 0, rtol = 0;
};

/// --atol/--rtol, or the defaults from the plan's logits storage type:
/// bf16/fp16 round every intermediate tensor, fp32 differs only by
/// summation order. `scale` (max |reference logit|) scales atol, since
/// synthetic weights give small logits.
Tolerance checkTolerance(const LoadedPlan &plan, const Options &o,
                         double scale) {
  bool lowPrecision = false;
  for (const plan::Function *f : *plan.root().functions())
    for (const plan::Binding *bind : *f->outputs())
      if (bind->name()->string_view() == "logits")
        lowPrecision |= f->tensors()->Get(unsigned(bind->tensor()))->dtype() !=
                        plan::DType::F32;
  return {o.atol.value_or((lowPrecision ? 2e-2 : 1e-5) * scale),
          o.rtol.value_or(lowPrecision ? 2e-2 : 1e-4)};
}

/// The generation options that replay `steps`' prompt and fed tokens.
GenerationOptions replayOf(const std::vector<StepRecord> &steps) {
  GenerationOptions g;
  g.prompt = steps.front().inputIds;
  g.decodeSteps = int(steps.size()) - 1;
  for (size_t i = 1; i < steps.size(); ++i)
    g.forcedTokens.push_back(steps[i].inputIds);
  return g;
}

/// "prefill " or "decode K ".
std::string stepName(size_t step) {
  return step == 0 ? "prefill " : "decode " + std::to_string(step) + " ";
}

/// The logits both runs of a step returned: every prompt position when
/// both plans return them all (--prefill-all-logits), else each sequence's
/// last.
const std::vector<float> &comparedLogits(const StepRecord &mine,
                                         const StepRecord &other) {
  return mine.positions > 1 && mine.positions == other.positions
             ? mine.allLogits
             : mine.logits;
}

/// One line per step of the comparison of `reference` and `steps`; the
/// number of logits outside tolerance.
int64_t compareSteps(const std::vector<StepRecord> &reference,
                     const std::vector<StepRecord> &steps, double atol,
                     double rtol) {
  int64_t failures = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    const std::vector<float> &want = comparedLogits(reference[i], steps[i]);
    const std::vector<float> &got = comparedLogits(steps[i], reference[i]);
    Comparison c = compareValues(want, got, atol, rtol);
    bool sameTokens = reference[i].nextToken == steps[i].nextToken;
    double stepScale = 0;
    for (float v : got)
      stepScale = std::max(stepScale, double(std::fabs(v)));
    std::cout << stepName(i);
    if (&want == &reference[i].allLogits)
      std::cout << "(" << reference[i].positions << " positions) ";
    std::cout << "max |logit| " << std::scientific << std::setprecision(3)
              << stepScale << ", max abs err " << std::setprecision(3)
              << c.maxAbsError << ", max rel err " << c.maxRelError
              << std::defaultfloat << ", mismatches " << c.mismatches
              << ", greedy tokens " << (sameTokens ? "equal" : "DIFFER")
              << "\n";
    failures += c.mismatches;
  }
  return failures;
}

/// The per-step lines, the first mismatches and the steps not compared of
/// a comparison with a reference logits file.
void printFileCheck(const ReferenceCheck &check, size_t stepsRun) {
  for (const StepCheck &sc : check.steps) {
    const Comparison &c = sc.comparison;
    std::cout << stepName(size_t(sc.step)) << "max |logit| " << std::scientific
              << std::setprecision(3) << sc.maxAbsLogit << ", max abs err "
              << c.maxAbsError << ", max rel err " << c.maxRelError
              << std::defaultfloat << ", mismatches " << c.mismatches;
    if (sc.sameGreedyTokens)
      std::cout << ", greedy tokens "
                << (*sc.sameGreedyTokens ? "equal" : "DIFFER");
    std::cout << "\n";
  }
  for (const LogitMismatch &m : check.firstMismatches)
    std::cout << "  mismatch: "
              << (m.step == 0 ? std::string("prefill")
                              : "decode " + std::to_string(m.step))
              << ", batch " << m.batch << ", position " << m.position
              << ", vocab id " << m.column << ": braid " << std::setprecision(9)
              << m.got << ", reference " << m.want << ", |a-b| "
              << std::scientific << std::setprecision(3)
              << std::fabs(double(m.got) - double(m.want)) << std::defaultfloat
              << std::setprecision(6) << "\n";
  if (check.mismatches > int64_t(check.firstMismatches.size()))
    std::cout << "  ("
              << check.mismatches - int64_t(check.firstMismatches.size())
              << " more mismatches not listed)\n";
  if (!check.notRun.empty()) {
    std::cout << "(not compared: the file's steps";
    for (int k : check.notRun)
      std::cout << " " << k;
    std::cout << ", beyond the " << stepsRun - 1 << " decode steps run)\n";
  }
}

} // namespace

Status checkAgainstPlan(const std::string &path, const std::string &backend,
                        const Options &o, const PlanRun &first,
                        const std::vector<StepRecord> &reference) {
  auto created = PlanRun::create(path, o, backend);
  if (!created)
    return created.status();
  PlanRun *other = created->get();
  const GenerationShape &a = first.shape, &b = other->shape;
  if (a.batch != b.batch || a.promptLength != b.promptLength ||
      a.vocab != b.vocab)
    return errorf("--check-against ", path, ": plan shapes differ (batch ",
                  b.batch, " prompt ", b.promptLength, " vocab ", b.vocab,
                  " vs ", a.batch, " ", a.promptLength, " ", a.vocab, ")");
  GenerationOptions g = replayOf(reference);
  g.allowNonFinite = o.allowNonFinite;
  auto steps = generate(b, g, other->stepFn());
  if (!steps)
    return errorf("--check-against ", path, ": ", steps.status().message());

  double scale = 0;
  for (size_t i = 0; i < reference.size(); ++i)
    for (float v : comparedLogits(reference[i], (*steps)[i]))
      scale = std::max(scale, double(std::fabs(v)));
  auto [atol, rtol] = checkTolerance(first.plan, o, scale);

  std::cout << "=== check against " << path << " (" << backend << ", ranks "
            << other->plan.root().world_size()
            << "), |a-b| <= " << std::scientific << std::setprecision(3) << atol
            << " + " << rtol << "*|b| ===\n"
            << std::defaultfloat;
  int64_t failures = compareSteps(reference, *steps, atol, rtol);
  if (failures)
    return errorf("check failed: ", failures,
                  " logits outside tolerance against ", path);
  std::cout << "check passed: " << reference.size()
            << " steps within tolerance\n";
  return Status::ok();
}

Status checkAgainstFile(const ReferenceLogits &ref, const Options &o,
                        const PlanRun &run,
                        const std::vector<StepRecord> &steps) {
  const std::string &path = ref.path;
  auto [atol, rtol] =
      checkTolerance(run.plan, o, referenceScale(ref, steps.size()));
  auto check = compareWithReference(ref, run.shape, steps, atol, rtol);
  if (!check)
    return check.status();
  std::cout << "=== check against " << path << " (reference logits, "
            << check->columns << " of " << run.shape.vocab
            << " vocabulary columns), |a-b| <= " << std::scientific
            << std::setprecision(3) << atol << " + " << rtol << "*|b| ===\n"
            << std::defaultfloat;
  printFileCheck(*check, steps.size());
  if (check->mismatches)
    return errorf("check failed: ", check->mismatches,
                  " logits outside tolerance against ", path);
  std::cout << "check passed: " << check->steps.size()
            << " steps within tolerance\n";
  return Status::ok();
}

std::string explainNonFiniteOnCpu(const Options &o,
                                  const std::vector<StepRecord> &steps) {
  Options cpu = o;
  cpu.check = true; // RunOptions::checkFinite
  auto created = PlanRun::create(o.plan, cpu, "cpu");
  if (!created)
    return "the CPU interpreter could not replay the run: " +
           created.status().message();
  GenerationOptions g = replayOf(steps);
  g.allowNonFinite = true; // the op check is the one that speaks
  auto replay = generate((*created)->shape, g, (*created)->stepFn());
  if (!replay)
    return "replayed on the CPU interpreter: " + replay.status().message();
  return "the " + o.backend +
         " backend produced them: the CPU interpreter computes finite values "
         "for the same tokens";
}

} // namespace braid::rt::cli
