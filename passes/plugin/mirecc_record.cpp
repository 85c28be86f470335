// mirecc-record: per-TU records from the mirecc decisions file (the "record"
// key of a module entry, FORMAT.md), part of mirecc's pass plugin.
//
// A module pass at pipeline start (at every optimisation level, -O0
// included), also named for opt. For each record "<name>": "<text>" of the
// module, it adds a private constant holding "<text>\n" in the ELF section
// .mirecc.<name>, kept by llvm.used. The linker concatenates the sections of
// all objects, so a program's .mirecc.<name> holds one line per translation
// unit, for a launcher to read from the binary (mirecc's NUMA task writes
// .mirecc.numa). Nothing here changes the code.
#include "llvm/ADT/StringMap.h"
#if __has_include("llvm/TargetParser/Triple.h")
#include "llvm/TargetParser/Triple.h"  // LLVM 17+
#else
#include "llvm/ADT/Triple.h"
#endif
#include "llvm/IR/Constants.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/JSON.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"

#include "mirecc_plugin.h"
#include <map>
#include <string>

using namespace llvm;

// Shared with mirecc_loophints.cpp (declared in both files, as for
// mirecc_openmp.cpp).
namespace {

constexpr const char *kGlobalPrefix = "__mirecc_record_";
constexpr const char *kSectionPrefix = ".mirecc.";

// module key (source_filename or "*") -> record name -> text
std::map<std::string, StringMap<std::string>> &store() {
  static std::map<std::string, StringMap<std::string>> s;
  return s;
}

// The name becomes part of a section name and of a symbol name, so it is
// kept to characters that need no quoting in either.
bool validName(StringRef name) {
  if (name.empty()) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-'))
      return false;
  return true;
}

std::string globalName(StringRef name) {
  std::string s = kGlobalPrefix + name.str();
  for (char &c : s)
    if (c == '-') c = '_';
  return s;
}

struct RecordPass : PassInfoMixin<RecordPass> {
  PreservedAnalyses run(Module &m, ModuleAnalysisManager &) {
    if (!mirecc::decisionsLoaded() || store().empty())
      return PreservedAnalyses::all();
    // An offload device module has the host's source_filename, but its image
    // is not where a launcher looks: the host object carries the record.
    if (m.getModuleFlag("openmp-device")) return PreservedAnalyses::all();
    // A section named ".mirecc.<name>" is valid only for ELF (Mach-O wants
    // "segment,section"), and the readers look for it in ELF binaries.
    if (!Triple(m.getTargetTriple()).isOSBinFormatELF())
      return PreservedAnalyses::all();
    // Per name, the module's own entry wins over "*", as for loops.
    StringMap<std::string> records;
    for (const std::string &key : {m.getSourceFileName(), std::string("*")}) {
      auto it = store().find(key);
      if (it == store().end()) continue;
      for (const auto &kv : it->second)
        records.try_emplace(kv.getKey(), kv.getValue());
    }
    if (records.empty()) return PreservedAnalyses::all();
    // Sorted, so that the object does not depend on the hash order.
    std::map<std::string, std::string> sorted;
    for (const auto &kv : records) sorted[kv.getKey().str()] = kv.getValue();
    LLVMContext &ctx = m.getContext();
    SmallVector<GlobalValue *, 4> added;
    for (const auto &[name, text] : sorted) {
      std::string gname = globalName(name);
      // Already there: the pass ran on this module before (opt on its own
      // output, an LTO module that has a TU's record), and a second copy
      // would give the section a second line for the same TU.
      if (m.getNamedValue(gname)) continue;
      Constant *init =
          ConstantDataArray::getString(ctx, text + "\n", /*AddNull=*/false);
      auto *gv = new GlobalVariable(m, init->getType(), /*isConstant=*/true,
                                    GlobalValue::PrivateLinkage, init, gname);
      // No padding between the lines of different objects in the linked
      // section.
      gv->setAlignment(Align(1));
      gv->setSection(kSectionPrefix + name);
      added.push_back(gv);
    }
    if (added.empty()) return PreservedAnalyses::all();
    // Nothing references the globals: llvm.used keeps them through global
    // DCE, and on ELF it also marks the section SHF_GNU_RETAIN, so that
    // --gc-sections keeps it too.
    appendToUsed(m, added);
    return PreservedAnalyses::none();
  }
};

}  // namespace

namespace mirecc {

std::string parseRecords(StringRef module, const json::Object &record,
                         const std::string &where) {
  StringMap<std::string> &records = store()[module.str()];
  for (const auto &kv : record) {
    StringRef name = kv.first;
    std::string w = where + ".record[\"" + name.str() + "\"]";
    if (!validName(name))
      return w + ": a record name is made of a-z, 0-9, '_' and '-'";
    auto text = kv.second.getAsString();
    if (!text) return w + ": expected a string";
    records[name] = text->str();
  }
  return "";
}

void clearRecords() { store().clear(); }

void registerRecordPasses(PassBuilder &pb) {
  // Pipeline start runs at every level, -O0 included (buildO0DefaultPipeline
  // calls these callbacks too, in LLVM 14 and 19), and also in the LTO and
  // ThinLTO pre-link pipelines; a record does not depend on the level.
  pb.registerPipelineStartEPCallback(
      [](ModulePassManager &mpm, OptimizationLevel) {
        mpm.addPass(RecordPass());
      });
  pb.registerPipelineParsingCallback(
      [](StringRef name, ModulePassManager &mpm,
         ArrayRef<PassBuilder::PipelineElement>) {
        if (name != "mirecc-record") return false;
        mpm.addPass(RecordPass());
        return true;
      });
}

}  // namespace mirecc
