// mirecc-loophints: an LLVM pass plugin (new pass manager) that sets the
// vectorize width and interleave count of chosen loops from a decisions file.
//
// Two passes, both registered on clang's pipeline and by name for opt:
//
//  * mirecc-loop-mark (module, pipeline start): numbers every function's
//    loops as mirecc's graph builder does (passes/graph: "<function>:<index of
//    the header block in the function's block list>") on the IR as clang
//    emits it, and tags each loop that has a decision with
//    !{!"mirecc.loop.id", !"<id>"} in its llvm.loop metadata.
//  * mirecc-loop-hints (function, vectorizer start): for each tagged loop,
//    sets llvm.loop.vectorize.width / llvm.loop.interleave.count, unless
//    that would change what the program computes (a floating-point
//    recurrence without reassoc, or a memory dependence with a bounded safe
//    distance) or the user already wrote a loop pragma.
//
// The file is named by -mllvm -mirecc-loop-decisions=<path> (or
// $MIRECC_LOOP_DECISIONS); its format is in FORMAT.md. A missing or bad file
// gives one warning line and changes nothing. The same file's "openmp"
// decisions are applied by mirecc-omp-decide (mirecc_openmp.cpp), its
// "record" entries by mirecc-record (mirecc_record.cpp).
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Analysis/IVDescriptors.h"
#include "llvm/Analysis/LoopAccessAnalysis.h"
#if LLVM_VERSION_MAJOR < 16
#include "llvm/Analysis/AliasAnalysis.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/IR/Dominators.h"
#endif
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/OptimizationRemarkEmitter.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Metadata.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#if __has_include("llvm/Plugins/PassPlugin.h")
#include "llvm/Plugins/PassPlugin.h"  // LLVM 22+
#else
#include "llvm/Passes/PassPlugin.h"
#endif
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include "mirecc_plugin.h"
#include <cstdlib>
#include <map>
#include <string>

using namespace llvm;

namespace {

constexpr const char *kPassName = "mirecc-loophints";
constexpr const char *kMarker = "mirecc.loop.id";
constexpr int64_t kMaxWidth = 64;       // VectorizerParams::MaxVectorWidth
constexpr int64_t kMaxInterleave = 16;  // the loop vectorizer's interleave limit

cl::opt<std::string> DecisionsPath(
    "mirecc-loop-decisions", cl::value_desc("path"), cl::init(""),
    cl::desc("mirecc loop decisions file (JSON) for the mirecc-loophints "
             "plugin; default $MIRECC_LOOP_DECISIONS"));

// 0 = not decided (leave LLVM's choice).
struct Factors {
  int64_t width = 0;
  int64_t interleave = 0;
};

// header block index -> factors, per function name.
using FunctionLoops = StringMap<std::map<int64_t, Factors>>;

struct Decisions {
  bool ok = false;
  std::map<std::string, FunctionLoops> modules;  // source_filename or "*"

  const std::map<int64_t, Factors> *forFunction(StringRef module,
                                                 StringRef fn) const {
    for (const std::string &key : {module.str(), std::string("*")}) {
      auto m = modules.find(key);
      if (m == modules.end()) continue;
      auto f = m->second.find(fn);
      if (f != m->second.end()) return &f->second;
    }
    return nullptr;
  }

  const Factors *lookup(StringRef module, StringRef id) const {
    auto [fn, index] = id.rsplit(':');
    int64_t header;
    if (index.getAsInteger(10, header)) return nullptr;
    for (const std::string &key : {module.str(), std::string("*")}) {
      auto m = modules.find(key);
      if (m == modules.end()) continue;
      auto f = m->second.find(fn);
      if (f == m->second.end()) continue;
      auto l = f->second.find(header);
      if (l != f->second.end()) return &l->second;
    }
    return nullptr;
  }
};

// Returns "" or the problem with the file.
std::string parseDecisions(StringRef text, Decisions &d) {
  Expected<json::Value> parsed = json::parse(text);
  if (!parsed) return "invalid JSON: " + toString(parsed.takeError());
  const json::Object *top = parsed->getAsObject();
  if (!top) return "expected a JSON object at the top";
  auto version = top->getInteger("version");
  if (!version) return "missing integer \"version\"";
  if (*version != 1)
    return "unsupported version " + std::to_string(*version) + " (expected 1)";
  const json::Object *modules = top->getObject("modules");
  if (!modules) return "missing object \"modules\"";
  for (const auto &mkv : *modules) {
    std::string mname = StringRef(mkv.first).str();
    std::string mwhere = "modules[\"" + mname + "\"]";
    const json::Object *mod = mkv.second.getAsObject();
    const json::Object *loops = mod ? mod->getObject("loops") : nullptr;
    const json::Value *openmp = mod ? mod->get("openmp") : nullptr;
    if (openmp) {
      if (!openmp->getAsObject())
        return mwhere + ": \"openmp\" must be an object";
      std::string problem =
          mirecc::parseOpenMPDecisions(mname, *openmp->getAsObject(), mwhere);
      if (!problem.empty()) return problem;
    }
    const json::Value *record = mod ? mod->get("record") : nullptr;
    if (record) {
      if (!record->getAsObject())
        return mwhere + ": \"record\" must be an object";
      std::string problem =
          mirecc::parseRecords(mname, *record->getAsObject(), mwhere);
      if (!problem.empty()) return problem;
    }
    if (mod && mod->get("loops") && !loops)
      return mwhere + ": \"loops\" must be an object";
    if (!loops && (openmp || record)) continue;  // no loop decisions
    if (!loops) return mwhere + ": missing object \"loops\"";
    FunctionLoops &fl = d.modules[mname];
    for (const auto &lkv : *loops) {
      StringRef id = lkv.first;
      std::string where = "modules[\"" + mname + "\"].loops[\"" + id.str() + "\"]";
      auto [fn, index] = id.rsplit(':');
      int64_t header;
      if (fn.empty() || index.getAsInteger(10, header) || header < 0)
        return where + ": a loop id is <function>:<header block index>";
      const json::Object *entry = lkv.second.getAsObject();
      if (!entry) return where + ": expected an object";
      Factors f;
      for (const auto &fkv : *entry) {
        StringRef key = fkv.first;
        int64_t *slot = key == "vectorize.width"    ? &f.width
                        : key == "interleave.count" ? &f.interleave
                                                    : nullptr;
        if (!slot) return where + ": unknown key \"" + key.str() + "\"";
        auto v = fkv.second.getAsInteger();
        int64_t max = slot == &f.width ? kMaxWidth : kMaxInterleave;
        if (!v || *v < 1 || *v > max || !isPowerOf2_64(*v))
          return where + ": " + key.str() + " must be a power of two in 1.." +
                 std::to_string(max);
        *slot = *v;
      }
      fl[fn][header] = f;
    }
  }
  return "";
}

// Loaded once per process, on first use.
const Decisions &decisions() {
  static Decisions d;
  static bool loaded = false;
  if (loaded) return d;
  loaded = true;
  std::string path = DecisionsPath;
  if (path.empty())
    if (const char *env = std::getenv("MIRECC_LOOP_DECISIONS")) path = env;
  if (path.empty()) return d;
  std::string problem;
  auto buf = MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buf)
    problem = "cannot read: " + buf.getError().message();
  else
    problem = parseDecisions((*buf)->getBuffer(), d);
  if (!problem.empty()) {
    d.modules.clear();
    mirecc::clearOpenMPDecisions();
    mirecc::clearRecords();
    errs() << "mirecc-loophints: warning: " << path << ": " << problem
           << "; loops left to LLVM\n";
    return d;
  }
  d.ok = true;
  return d;
}

StringRef attrName(const MDOperand &op) {
  if (auto *n = dyn_cast<MDNode>(op.get()))
    if (n->getNumOperands() > 0)
      if (auto *s = dyn_cast<MDString>(n->getOperand(0).get()))
        return s->getString();
  return "";
}

// The loop's llvm.loop node: Loop::getLoopID, else (latches disagree, as in
// clang's output for a while loop with `continue`) the first latch's.
MDNode *loopMetadata(const Loop *l) {
  if (MDNode *id = l->getLoopID()) return id;
  SmallVector<BasicBlock *, 4> latches;
  l->getLoopLatches(latches);
  for (BasicBlock *bb : latches)
    if (MDNode *md = bb->getTerminator()->getMetadata(LLVMContext::MD_loop))
      if (md->getNumOperands() > 0 && md->getOperand(0) == md) return md;
  return nullptr;
}

// A new self-referencing loop id: `old`'s attributes minus those named in
// `drop`, plus `add`.
MDNode *rebuild(LLVMContext &ctx, MDNode *old, ArrayRef<StringRef> drop,
                ArrayRef<Metadata *> add) {
  SmallVector<Metadata *, 8> ops{nullptr};
  if (old)
    for (unsigned i = 1; i < old->getNumOperands(); ++i) {
      StringRef name = attrName(old->getOperand(i));
      if (!is_contained(drop, name)) ops.push_back(old->getOperand(i).get());
    }
  ops.append(add.begin(), add.end());
  MDNode *id = MDNode::getDistinct(ctx, ops);
  id->replaceOperandWith(0, id);
  return id;
}

StringRef markerOf(MDNode *id) {
  if (!id) return "";
  for (unsigned i = 1; i < id->getNumOperands(); ++i)
    if (attrName(id->getOperand(i)) == kMarker) {
      auto *n = cast<MDNode>(id->getOperand(i).get());
      if (n->getNumOperands() == 2)
        if (auto *s = dyn_cast<MDString>(n->getOperand(1).get()))
          return s->getString();
    }
  return "";
}

// The user's own loop pragma (#pragma clang loop vectorize/interleave).
bool hasUserHints(MDNode *id) {
  if (!id) return false;
  for (unsigned i = 1; i < id->getNumOperands(); ++i) {
    StringRef name = attrName(id->getOperand(i));
    if (name.find("llvm.loop.vectorize.") == 0 ||
        name.find("llvm.loop.interleave.") == 0)
      return true;
  }
  return false;
}

std::string describe(StringRef id, const Factors &f) {
  std::string s = "loop " + id.str() + ":";
  if (f.width) s += " vectorize.width=" + std::to_string(f.width);
  if (f.interleave) s += " interleave.count=" + std::to_string(f.interleave);
  return s;
}

// Why forcing `f` on `l` could change results, or "". Forcing a width makes
// the loop vectorizer reorder floating-point operations (and interleaving
// reassociates reductions), so every FP header phi must be a reduction whose
// operations all allow reassociation.
std::string unsafeReason(Loop *l, const Factors &f) {
  if (f.width <= 1 && f.interleave <= 1) return "";
  // isReductionPHI needs a preheader and one latch (LoopSimplify form, which
  // the vectorizer restores later): without them, count it as unsafe.
  bool simple = l->getLoopPreheader() && l->getLoopLatch();
  for (PHINode &phi : l->getHeader()->phis()) {
    if (!phi.getType()->isFPOrFPVectorTy()) continue;
    RecurrenceDescriptor rd;
    if (simple && phi.getNumIncomingValues() == 2 &&
        RecurrenceDescriptor::isReductionPHI(&phi, l, rd) &&
        rd.getFastMathFlags().allowReassoc())
      continue;
    return "floating-point recurrence without the reassoc flag (no "
           "-ffast-math / -fassociative-math): forcing a factor would "
           "reorder its operations";
  }
  return "";
}

struct LoopMarkPass : PassInfoMixin<LoopMarkPass> {
  PreservedAnalyses run(Module &m, ModuleAnalysisManager &mam) {
    const Decisions &d = decisions();
    if (!d.ok) return PreservedAnalyses::all();
    auto &fam =
        mam.getResult<FunctionAnalysisManagerModuleProxy>(m).getManager();
    for (Function &fn : m) {
      if (fn.isDeclaration()) continue;
      const auto *wanted = d.forFunction(m.getSourceFileName(), fn.getName());
      if (!wanted) continue;
      LoopInfo &li = fam.getResult<LoopAnalysis>(fn);
      auto &ore = fam.getResult<OptimizationRemarkEmitterAnalysis>(fn);
      LLVMContext &ctx = fn.getContext();
      std::map<int64_t, bool> found;
      int64_t index = 0;
      for (BasicBlock &bb : fn) {
        int64_t header = index++;
        Loop *l = li.getLoopFor(&bb);
        if (!l || l->getHeader() != &bb || !wanted->count(header)) continue;
        found[header] = true;
        std::string id = fn.getName().str() + ":" + std::to_string(header);
        MDNode *old = loopMetadata(l);
        if (hasUserHints(old)) {
          ore.emit([&] {
            return OptimizationRemarkMissed(kPassName, "UserPragma",
                                            l->getStartLoc(), l->getHeader())
                   << "loop " << id
                   << ": not changed: the source has a loop pragma for it";
          });
          continue;
        }
        Metadata *marker[] = {MDNode::get(
            ctx, {MDString::get(ctx, kMarker), MDString::get(ctx, id)})};
        l->setLoopID(rebuild(ctx, old, {kMarker}, marker));
      }
      for (const auto &kv : *wanted) {
        if (found.count(kv.first)) continue;
        ore.emit([&] {
          return OptimizationRemarkMissed(kPassName, "NoSuchLoop",
                                          DiagnosticLocation(fn.getSubprogram()),
                                          &fn.getEntryBlock())
                 << "loop " << fn.getName() << ":" << std::to_string(kv.first)
                 << ": no loop has that header block; decision ignored";
        });
      }
    }
    return PreservedAnalyses::all();  // metadata only
  }
};

struct LoopHintsPass : PassInfoMixin<LoopHintsPass> {
  PreservedAnalyses run(Function &fn, FunctionAnalysisManager &fam) {
    const Decisions &d = decisions();
    if (!d.ok) return PreservedAnalyses::all();
    LoopInfo &li = fam.getResult<LoopAnalysis>(fn);
    if (li.empty()) return PreservedAnalyses::all();
    auto &ore = fam.getResult<OptimizationRemarkEmitterAnalysis>(fn);
    LLVMContext &ctx = fn.getContext();
    StringRef module = fn.getParent()->getSourceFileName();
    // A loop-carried memory dependence with a bounded safe distance: the
    // vectorizer clamps a forced width to it, but a forced interleave count
    // on top of the clamped width was seen to break such loops (clang 14 and
    // 19: a[i] = a[i-2] * k + b[i] forced to 4 x 2 ran as 2 x 2, wrong
    // results), so such loops keep LLVM's own choice.
#if LLVM_VERSION_MAJOR >= 16
    auto &lai = fam.getResult<LoopAccessAnalysis>(fn);
    auto boundedDependence = [&](Loop *l) {
      return !lai.getInfo(*l).getDepChecker().isSafeForAnyVectorWidth();
    };
#else
    auto &se = fam.getResult<ScalarEvolutionAnalysis>(fn);
    auto &tli = fam.getResult<TargetLibraryAnalysis>(fn);
    auto &aa = fam.getResult<AAManager>(fn);
    auto &dt = fam.getResult<DominatorTreeAnalysis>(fn);
    auto boundedDependence = [&](Loop *l) {
      LoopAccessInfo info(l, &se, &tli, &aa, &dt, &li);
      return !info.getDepChecker().isSafeForAnyVectorWidth();
    };
#endif
    for (Loop *l : li.getLoopsInPreorder()) {
      MDNode *old = l->getLoopID();
      StringRef id = markerOf(old);
      if (id.empty()) continue;
      const Factors *f = d.lookup(module, id);
      if (!f || (!f->width && !f->interleave)) continue;
      std::string why = unsafeReason(l, *f);
      if (why.empty() && l->isInnermost() && (f->width > 1 || f->interleave > 1) &&
          boundedDependence(l))
        why = "a loop-carried memory dependence with a bounded safe distance: "
              "forced factors could break it";
      if (!why.empty()) {
        ore.emit([&] {
          return OptimizationRemarkMissed(kPassName, "Unsafe", l->getStartLoc(),
                                          l->getHeader())
                 << describe(id, *f) << " not applied: " << why;
        });
        continue;
      }
      Type *i32 = Type::getInt32Ty(ctx);
      SmallVector<Metadata *, 2> add;
      SmallVector<StringRef, 2> drop;
      if (f->width) {
        drop.push_back("llvm.loop.vectorize.width");
        add.push_back(MDNode::get(
            ctx, {MDString::get(ctx, "llvm.loop.vectorize.width"),
                  ConstantAsMetadata::get(ConstantInt::get(i32, f->width))}));
      }
      if (f->interleave) {
        drop.push_back("llvm.loop.interleave.count");
        add.push_back(MDNode::get(
            ctx,
            {MDString::get(ctx, "llvm.loop.interleave.count"),
             ConstantAsMetadata::get(ConstantInt::get(i32, f->interleave))}));
      }
      std::string text = describe(id, *f);  // before `old` is replaced
      l->setLoopID(rebuild(ctx, old, drop, add));
      ore.emit([&] {
        return OptimizationRemark(kPassName, "Applied", l->getStartLoc(),
                                  l->getHeader())
               << text;
      });
    }
    return PreservedAnalyses::all();  // metadata only
  }
};

}  // namespace

bool mirecc::decisionsLoaded() { return decisions().ok; }

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "mirecc-loophints", "1",
          [](PassBuilder &pb) {
            pb.registerPipelineStartEPCallback(
                [](ModulePassManager &mpm, OptimizationLevel level) {
                  if (level != OptimizationLevel::O0) mpm.addPass(LoopMarkPass());
                });
            pb.registerVectorizerStartEPCallback(
                [](FunctionPassManager &fpm, OptimizationLevel) {
                  fpm.addPass(LoopHintsPass());
                });
            pb.registerPipelineParsingCallback(
                [](StringRef name, ModulePassManager &mpm,
                   ArrayRef<PassBuilder::PipelineElement>) {
                  if (name != "mirecc-loop-mark") return false;
                  mpm.addPass(LoopMarkPass());
                  return true;
                });
            pb.registerPipelineParsingCallback(
                [](StringRef name, FunctionPassManager &fpm,
                   ArrayRef<PassBuilder::PipelineElement>) {
                  if (name != "mirecc-loop-hints") return false;
                  fpm.addPass(LoopHintsPass());
                  return true;
                });
            mirecc::registerOpenMPPasses(pb);  // after mirecc-loop-mark
            mirecc::registerRecordPasses(pb);
            mirecc::registerCoarsenPasses(pb);
          }};
}
