//===- MlirFlags.cpp - MLIR's own braid-opt flags, made to fail cleanly ---===//
#include "tools/braid-opt/MlirFlags.h"

#include "frontend/input/InputFile.h"

#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

using namespace braid;

namespace {

/// The values given to MLIR's list flag `name` (none when it is absent).
std::vector<std::string> listFlagValues(llvm::StringRef name) {
  auto &options = llvm::cl::getRegisteredOptions();
  auto it = options.find(name);
  if (it == options.end() || it->second->getNumOccurrences() == 0)
    return {};
  // MlirOptMain declares both plugin flags as cl::list<std::string>.
  auto *list = static_cast<llvm::cl::list<std::string> *>(it->second);
  return {list->begin(), list->end()};
}

/// MlirOptMain's callback has already tried each plugin and, when one
/// fails, printed "Request ignored." and gone on: load it again to learn
/// whether it failed, and why.
template <typename Plugin>
llvm::Error checkPlugins(llvm::StringRef flag, llvm::StringRef what) {
  for (const std::string &path : listFlagValues(flag)) {
    auto plugin = Plugin::load(path);
    if (!plugin)
      return llvm::createStringError("--" + flag.str() + "=" + path +
                                     ": cannot load " + what.str() + ": " +
                                     llvm::toString(plugin.takeError()));
  }
  return llvm::Error::success();
}

} // namespace

llvm::Error braid::checkMlirOptFlags(const mlir::MlirOptMainConfig &config) {
  if (auto err =
          checkPlugins<mlir::PassPlugin>("load-pass-plugin", "the pass plugin"))
    return err;
  if (auto err = checkPlugins<mlir::DialectPlugin>("load-dialect-plugin",
                                                   "the dialect plugin"))
    return err;
  llvm::StringRef irdl = config.getIrdlFile();
  if (irdl == "-")
    return llvm::createStringError(
        "--irdl-file: give a file; stdin is braid-opt's input");
  if (!irdl.empty()) {
    // Read once here with the input's bound and refusals; MlirOptMain then
    // reads the same (small) file again.
    auto file = readInputFile(irdl, kMaxIrInputBytes, "IRDL file");
    if (!file)
      return llvm::createStringError("--irdl-file: " +
                                     llvm::toString(file.takeError()));
  }
  return llvm::Error::success();
}

static void exitOnFatalError(void *tool, const char *reason, bool) {
  llvm::errs() << static_cast<const char *>(tool) << ": " << reason << "\n";
  // Removes the output file the tool was writing (RemoveFileOnSignal).
  llvm::sys::RunInterruptHandlers();
  // Other threads may still run: no static destructors.
  llvm::sys::Process::Exit(1, /*NoCleanup=*/true);
}

void braid::exitCleanlyOnFatalErrors(const char *tool) {
  llvm::install_fatal_error_handler(exitOnFatalError, const_cast<char *>(tool));
}
