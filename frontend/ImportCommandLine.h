//===- ImportCommandLine.h - Shared importer flags ---------------*- C++ -*-===//
//
// The model and import flags of braid-import and braid-compile, defined once:
// a tool that calls these functions gets the options registered.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_FRONTEND_IMPORTCOMMANDLINE_H
#define BRAID_FRONTEND_IMPORTCOMMANDLINE_H

#include "frontend/Importer.h"
#include "frontend/ModelConfig.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

namespace braid {

/// Integer flag values in base 10 only. LLVM's own parser reads radix
/// prefixes: `--seq 010` was 8 tokens and `--seq 0x10` 16, a silent
/// misreading of what a user types. Use as
/// `llvm::cl::opt<int64_t, false, DecimalParser>`.
class DecimalParser : public llvm::cl::basic_parser<int64_t> {
public:
  DecimalParser(llvm::cl::Option &option) : basic_parser(option) {}
  bool parse(llvm::cl::Option &option, llvm::StringRef name,
             llvm::StringRef arg, int64_t &value) {
    if (!arg.getAsInteger(10, value))
      return false;
    return option.error("'" + arg +
                        "' is not a decimal integer (radix prefixes such as "
                        "0x are not read; 010 is ten)");
  }
  llvm::StringRef getValueName() const override { return "int"; }
  void printName(const llvm::cl::Option &option, size_t width) const {
    printOptionName(option, width);
  }
};

} // namespace braid

/// --print-options for a DecimalParser option (LLVM's generic printer
/// expects its own parser<int64_t>).
template <>
inline void llvm::cl::printOptionDiff<braid::DecimalParser, int64_t>(
    const Option &option, const basic_parser<int64_t> &parser,
    const int64_t &value, const OptionValue<int64_t> &defaultValue,
    size_t globalWidth) {
  static_cast<const braid::DecimalParser &>(parser).printName(option,
                                                              globalWidth);
  llvm::outs() << "= " << value;
  if (defaultValue.hasValue())
    llvm::outs() << " (default: " << defaultValue.getValue() << ")";
  llvm::outs() << "\n";
}

namespace braid {

/// The positional config.json (default: the embedded tiny LLaMA), parsed.
llvm::Expected<ModelConfig> modelConfigFromCommandLine();

/// --tp, --batch, --seq, --max-seq, --dtype, --keep-logits-sharded,
/// --prefill-all-logits, --prefill-buckets (an error names a bad bucket).
llvm::Expected<ImportOptions> importOptionsFromCommandLine();

/// Hides from --help every option outside the model import options and
/// `toolCategories` (LLVM's backend flags that libLLVM registers, and
/// MLIR's, unless `showMlirOptions`: those named mlir-*, e.g. the pass
/// manager's IR printing). Hidden options still parse.
void showOnlyBraidOptionsInHelp(
    llvm::ArrayRef<const llvm::cl::OptionCategory *> toolCategories,
    bool showMlirOptions);

} // namespace braid

#endif // BRAID_FRONTEND_IMPORTCOMMANDLINE_H
