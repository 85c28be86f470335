// mirecc-call-mark: per-call-site inlining decisions from the mirecc
// decisions file (the "calls" key of a module entry, FORMAT.md, "Call
// sites"), part of mirecc's pass plugin.
//
// A module pass at pipeline start (not at -O0: nothing inlines there), also
// named for opt. The IR is still as clang emitted it, so the plugin numbers
// each function's direct calls as mirecc does (mirecc.ir.calls): a call
// site's id is "<caller>:call<k>", k counting from 0 in layout order the
// caller's calls and invokes whose callee is a function (not an intrinsic,
// not through a cast or a pointer). A decided site gets the call-site
// attribute `alwaysinline` ("inline") or `noinline` ("noinline"), which
// LLVM's inliner honours at that site alone (an `alwaysinline` site whose
// callee cannot be inlined is left as it is); everything else is left to
// LLVM.
//
// mirecc-call-tag and mirecc-call-cost (named for opt only) give the
// inlining policy LLVM's own view of each site: the tag pass attaches the
// site's id as !mirecc.call metadata while the IR is as clang emitted it;
// after any simplification the cost pass prints, for each tagged site whose
// callee the module defines, one JSON line: LLVM's inline cost and
// threshold at -Oz and its cost features (InlineModelFeatureMaps.h).
#include "llvm/ADT/StringMap.h"
#include "llvm/Analysis/AssumptionCache.h"
#include "llvm/Analysis/InlineCost.h"
#include "llvm/Analysis/InlineModelFeatureMaps.h"
#include "llvm/Analysis/OptimizationRemarkEmitter.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/Analysis/TargetTransformInfo.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/InstrTypes.h"
#include "llvm/IR/Metadata.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include "mirecc_plugin.h"
#include <map>
#include <string>
#include <vector>

using namespace llvm;

namespace {

constexpr const char *kPassName = "mirecc-loophints";

// module key (source_filename or "*") -> call-site id -> inline?
std::map<std::string, StringMap<bool>> &store() {
  static std::map<std::string, StringMap<bool>> s;
  return s;
}

// The callee a call site's id counts: a function called directly (its
// type matching the call's or not: the IR's text names it either way).
Function *directCallee(const CallBase &cb) {
  auto *f = dyn_cast<Function>(cb.getCalledOperand());
  return f && !f->isIntrinsic() ? f : nullptr;
}

struct CallMarkPass : PassInfoMixin<CallMarkPass> {
  PreservedAnalyses run(Module &m, ModuleAnalysisManager &mam) {
    if (!mirecc::decisionsLoaded() || store().empty()) return PreservedAnalyses::all();
    // Per site, the module's own entry wins over "*", as for loops.
    StringMap<bool> calls;
    for (const std::string &key : {m.getSourceFileName(), std::string("*")}) {
      auto it = store().find(key);
      if (it == store().end()) continue;
      for (const auto &kv : it->second) calls.try_emplace(kv.getKey(), kv.getValue());
    }
    if (calls.empty()) return PreservedAnalyses::all();
    auto &fam = mam.getResult<FunctionAnalysisManagerModuleProxy>(m).getManager();
    bool changed = false;
    for (Function &f : m) {
      if (f.isDeclaration()) continue;
      // the ids of this function's sites, when any is decided
      std::string prefix = f.getName().str() + ":call";
      bool any = false;
      for (const auto &kv : calls) any |= kv.getKey().substr(0, prefix.size()) == prefix;
      if (!any) continue;
      OptimizationRemarkEmitter &ore = fam.getResult<OptimizationRemarkEmitterAnalysis>(f);
      unsigned k = 0;
      for (Instruction &i : instructions(f)) {
        auto *cb = dyn_cast<CallBase>(&i);
        Function *callee = cb ? directCallee(*cb) : nullptr;
        if (!callee) continue;
        std::string id = prefix + std::to_string(k++);
        auto it = calls.find(id);
        if (it == calls.end()) continue;
        bool inlined = it->getValue();
        cb->removeFnAttr(inlined ? Attribute::NoInline : Attribute::AlwaysInline);
        cb->addFnAttr(inlined ? Attribute::AlwaysInline : Attribute::NoInline);
        changed = true;
        ore.emit([&] {
          return OptimizationRemark(kPassName, "CallMarked", cb)
                 << "call " << id << " to " << callee->getName() << ": "
                 << (inlined ? "inline" : "noinline");
        });
      }
    }
    return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
  }
};

// Each direct call site's id, as metadata that later passes carry along.
struct CallTagPass : PassInfoMixin<CallTagPass> {
  PreservedAnalyses run(Module &m, ModuleAnalysisManager &) {
    for (Function &f : m) {
      if (f.isDeclaration()) continue;
      unsigned k = 0;
      for (Instruction &i : instructions(f)) {
        auto *cb = dyn_cast<CallBase>(&i);
        if (!cb || !directCallee(*cb)) continue;
        LLVMContext &ctx = m.getContext();
        std::string id = f.getName().str() + ":call" + std::to_string(k++);
        cb->setMetadata("mirecc.call", MDNode::get(ctx, MDString::get(ctx, id)));
      }
    }
    return PreservedAnalyses::all();
  }
};

// One JSON line per tagged site with a defined callee: {"site", "cost",
// "threshold", "decision" ("always", "never" or "cost"), "features"}.
struct CallCostPass : PassInfoMixin<CallCostPass> {
  PreservedAnalyses run(Module &m, ModuleAnalysisManager &mam) {
    auto &fam = mam.getResult<FunctionAnalysisManagerModuleProxy>(m).getManager();
    auto getAC = [&](Function &f) -> AssumptionCache & {
      return fam.getResult<AssumptionAnalysis>(f);
    };
    auto getTLI = [&](Function &f) -> const TargetLibraryInfo & {
      return fam.getResult<TargetLibraryAnalysis>(f);
    };
    InlineParams params = getInlineParams(2, 2);  // -Oz's
    params.ComputeFullInlineCost = true;          // not cut off at the threshold
    std::vector<CallBase *> sites;
    for (Function &f : m)
      for (Instruction &i : instructions(f))
        if (auto *cb = dyn_cast<CallBase>(&i))
          if (cb->getMetadata("mirecc.call")) sites.push_back(cb);
    for (CallBase *cb : sites) {
      Function *callee = directCallee(*cb);
      if (!callee || callee->isDeclaration()) continue;
      auto *id = cast<MDString>(cb->getMetadata("mirecc.call")->getOperand(0));
      json::Object row{{"site", id->getString()}, {"features", json::Array()}};
      if (cb->getCalledFunction() != callee) {
        // called with another type than its own (LLVM 15+ names no callee
        // then, and neither inlines nor costs it)
        row["decision"] = "never";
        outs() << formatv("{0}", json::Value(std::move(row))) << "\n";
        continue;
      }
      TargetTransformInfo &tti = fam.getResult<TargetIRAnalysis>(*callee);
      InlineCost ic = getInlineCost(*cb, params, tti, getAC, getTLI);
      row["decision"] = ic.isAlways() ? "always" : ic.isNever() ? "never" : "cost";
      if (ic.isVariable()) {
        row["cost"] = ic.getCost();
        row["threshold"] = ic.getThreshold();
      }
      json::Array features;
      // LLVM 14's features in its order: later LLVMs add
      // switch_default_dest_penalty (dropped, so that rows compare)
      if (auto f = getInliningCostFeatures(*cb, tti, getAC))
        for (size_t k = 0; k < f->size(); ++k) {
#if LLVM_VERSION_MAJOR >= 18
          if (k == size_t(InlineCostFeatureIndex::switch_default_dest_penalty)) continue;
#endif
          features.push_back(int64_t((*f)[k]));
        }
      row["features"] = std::move(features);
      outs() << formatv("{0}", json::Value(std::move(row))) << "\n";
    }
    return PreservedAnalyses::all();
  }
};

}  // namespace

namespace mirecc {

std::string parseCallDecisions(StringRef module, const json::Object &calls,
                               const std::string &where) {
  StringMap<bool> &out = store()[module.str()];
  for (const auto &kv : calls) {
    StringRef id = kv.first;
    std::string w = where + ".calls[\"" + id.str() + "\"]";
    auto [fn, site] = id.rsplit(':');
    unsigned k;
    if (fn.empty() || !site.consume_front("call") || site.empty() ||
        site.getAsInteger(10, k))
      return w + ": a call site id is <function>:call<index>";
    auto value = kv.second.getAsString();
    if (!value || (*value != "inline" && *value != "noinline"))
      return w + ": expected \"inline\" or \"noinline\"";
    out[id] = *value == "inline";
  }
  return "";
}

void clearCallDecisions() { store().clear(); }

void registerCallPasses(PassBuilder &pb) {
  pb.registerPipelineStartEPCallback([](ModulePassManager &mpm, OptimizationLevel level) {
    if (level == OptimizationLevel::O0) return;   // nothing inlines there
    mpm.addPass(CallMarkPass());
  });
  pb.registerPipelineParsingCallback([](StringRef name, ModulePassManager &mpm,
                                        ArrayRef<PassBuilder::PipelineElement>) {
    if (name == "mirecc-call-mark") mpm.addPass(CallMarkPass());
    else if (name == "mirecc-call-tag") mpm.addPass(CallTagPass());
    else if (name == "mirecc-call-cost") mpm.addPass(CallCostPass());
    else return false;
    return true;
  });
}

}  // namespace mirecc
