// mirecc-loophints: an LLVM pass plugin (new pass manager) that sets the
// vectorize width, interleave count and unroll count of chosen loops from a
// decisions file.
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
//    distance) or the user already wrote a loop pragma, and
//    llvm.loop.unroll.count for the unroller after the vectorizer (which
//    never changes results), unless the user wrote an unroll pragma.
//
//  * mirecc-versions (module, pipeline start, before mirecc-loop-mark): a
//    function with "versions" is compiled in a few versions, <fn>.mirecc.v0
//    (LLVM's own) and <fn>.mirecc.v1.. (each with its loops' factors, set
//    by the two passes above under the clone's name), and its body becomes
//    a dispatch that asks the adaptive runtime (runtime/adapt) which to run.
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
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/IRBuilder.h"
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
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"

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
constexpr int64_t kMaxUnroll = 16;

cl::opt<std::string> DecisionsPath(
    "mirecc-loop-decisions", cl::value_desc("path"), cl::init(""),
    cl::desc("mirecc loop decisions file (JSON) for the mirecc-loophints "
             "plugin; default $MIRECC_LOOP_DECISIONS"));

// 0 = not decided (leave LLVM's choice).
struct Factors {
  int64_t width = 0;
  int64_t interleave = 0;
  int64_t unroll = 0;  // 1: not unrolled
};

// header block index -> factors, per function name.
using FunctionLoops = StringMap<std::map<int64_t, Factors>>;

// A function's versions (FORMAT.md, "Function versions"): version i + 1's
// loop factors are the loop decisions of "<function>.mirecc.v<i + 1>".
struct VersionSet {
  std::string key, name;
  std::vector<std::string> names;  // versions 1.., for the runtime's store
  // versions 1..: "" or the tag that names its clone <fn>.mirecc.v<i>.<tag>,
  // kept out of line so that a compile flag reaches it by that name (a
  // loop-nest schedule's -polly-only-func)
  std::vector<std::string> tags;
};
constexpr const char *kVersionSuffix = ".mirecc.v";
constexpr int kMaxVersions = 8;   // the runtime's arms, LLVM's own among them

struct Decisions {
  bool ok = false;
  std::map<std::string, FunctionLoops> modules;  // source_filename or "*"
  std::map<std::string, StringMap<VersionSet>> versions;

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

// One loop's factors ("" or the problem).
std::string parseFactors(const json::Value &value, const std::string &where,
                         Factors &f) {
  const json::Object *entry = value.getAsObject();
  if (!entry) return where + ": expected an object";
  for (const auto &fkv : *entry) {
    StringRef key = fkv.first;
    int64_t *slot = key == "vectorize.width"    ? &f.width
                    : key == "interleave.count" ? &f.interleave
                    : key == "unroll.count"     ? &f.unroll
                                                : nullptr;
    if (!slot) return where + ": unknown key \"" + key.str() + "\"";
    auto v = fkv.second.getAsInteger();
    int64_t max = slot == &f.width       ? kMaxWidth
                  : slot == &f.interleave ? kMaxInterleave
                                          : kMaxUnroll;
    if (!v || *v < 1 || *v > max || !isPowerOf2_64(*v))
      return where + ": " + key.str() + " must be a power of two in 1.." +
             std::to_string(max);
    *slot = *v;
  }
  return "";
}

// A string of 1..512 bytes with no tab, newline or (when `word`) space
// (the runtime's store keeps one per line, tab-separated).
bool storeText(const json::Value *v, bool word) {
  if (!v) return false;
  auto s = v->getAsString();
  return s && !s->empty() && s->size() <= 512 &&
         s->find_first_of(word ? " \t\n" : "\t\n") == StringRef::npos;
}

// A module entry's "versions" ("" or the problem).
std::string parseVersions(const std::string &mname, const json::Object &versions,
                          const std::string &mwhere, Decisions &d) {
  for (const auto &fkv : versions) {
    std::string fn = StringRef(fkv.first).str();
    std::string where = mwhere + ".versions[\"" + fn + "\"]";
    const json::Object *entry = fkv.second.getAsObject();
    if (!entry) return where + ": expected an object";
    if (!storeText(entry->get("key"), true))
      return where + ": \"key\" must be a string without spaces, tabs or newlines";
    if (!storeText(entry->get("name"), false))
      return where + ": \"name\" must be a one-line string";
    const json::Array *list = entry->getArray("versions");
    if (!list || list->empty() || list->size() > kMaxVersions - 1)
      return where + ": \"versions\" must be an array of 1.." +
             std::to_string(kMaxVersions - 1) + " objects";
    VersionSet set{entry->getString("key")->str(), entry->getString("name")->str(), {}};
    for (size_t i = 0; i < list->size(); ++i) {
      std::string vwhere = where + ".versions[" + std::to_string(i) + "]";
      const json::Object *v = (*list)[i].getAsObject();
      const json::Object *loops = v ? v->getObject("loops") : nullptr;
      if (!v || !loops) return vwhere + ": expected {\"name\": ..., \"loops\": {...}}";
      auto name = v->getString("name");
      if (!name || name->empty() || name->size() > 31 ||
          name->find_first_of(": \t\n;,") != StringRef::npos)
        return vwhere + ": \"name\" must be 1..31 characters without spaces, ':', ';' or ','";
      for (const std::string &other : set.names)
        if (other == *name) return vwhere + ": two versions named " + other;
      set.names.push_back(name->str());
      std::string clone = fn + kVersionSuffix + std::to_string(i + 1);
      std::string tag;
      if (const json::Value *t = v->get("tag")) {
        auto text = t->getAsString();
        if (!text || text->empty() || text->size() > 15 ||
            text->find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789") != StringRef::npos)
          return vwhere + ": \"tag\" must be 1..15 lowercase letters or digits";
        tag = text->str();
        clone += "." + tag;
      }
      set.tags.push_back(tag);
      for (const auto &lkv : *loops) {
        int64_t header;
        std::string lwhere = vwhere + ".loops[\"" + StringRef(lkv.first).str() + "\"]";
        if (StringRef(lkv.first).getAsInteger(10, header) || header < 0)
          return lwhere + ": a loop is its header block's index in the function";
        Factors f;
        std::string problem = parseFactors(lkv.second, lwhere, f);
        if (!problem.empty()) return problem;
        d.modules[mname][clone][header] = f;
      }
    }
    d.versions[mname][fn] = std::move(set);
  }
  return "";
}

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
    const json::Value *calls = mod ? mod->get("calls") : nullptr;
    if (calls) {
      if (!calls->getAsObject())
        return mwhere + ": \"calls\" must be an object";
      std::string problem = mirecc::parseCallDecisions(mname, *calls->getAsObject(), mwhere);
      if (!problem.empty()) return problem;
    }
    const json::Value *versions = mod ? mod->get("versions") : nullptr;
    if (versions) {
      if (!versions->getAsObject())
        return mwhere + ": \"versions\" must be an object";
      std::string problem = parseVersions(mname, *versions->getAsObject(), mwhere, d);
      if (!problem.empty()) return problem;
    }
    if (mod && mod->get("loops") && !loops)
      return mwhere + ": \"loops\" must be an object";
    if (!loops && (openmp || record || versions || calls)) continue;  // no loop decisions
    if (!loops) return mwhere + ": missing object \"loops\"";
    FunctionLoops &fl = d.modules[mname];
    for (const auto &lkv : *loops) {
      StringRef id = lkv.first;
      std::string where = "modules[\"" + mname + "\"].loops[\"" + id.str() + "\"]";
      auto [fn, index] = id.rsplit(':');
      int64_t header;
      if (fn.empty() || index.getAsInteger(10, header) || header < 0)
        return where + ": a loop id is <function>:<header block index>";
      Factors f;
      std::string problem = parseFactors(lkv.second, where, f);
      if (!problem.empty()) return problem;
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
    d.versions.clear();
    mirecc::clearOpenMPDecisions();
    mirecc::clearRecords();
    mirecc::clearCallDecisions();
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

// An unroll attribute already on the loop (the user's #pragma unroll or
// #pragma clang loop unroll...): it stands.
bool hasUnrollHints(MDNode *id) {
  if (!id) return false;
  for (unsigned i = 1; i < id->getNumOperands(); ++i)
    if (attrName(id->getOperand(i)).find("llvm.loop.unroll.") == 0)
      return true;
  return false;
}

std::string describe(StringRef id, const Factors &f) {
  std::string s = "loop " + id.str() + ":";
  if (f.width) s += " vectorize.width=" + std::to_string(f.width);
  if (f.interleave) s += " interleave.count=" + std::to_string(f.interleave);
  if (f.unroll) s += " unroll.count=" + std::to_string(f.unroll);
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
      if (!f || (!f->width && !f->interleave && !f->unroll)) continue;
      Factors vec = *f, unroll;  // the vectorizer's part and the unroller's
      vec.unroll = 0;
      unroll.unroll = f->unroll;
      std::string why;
      if (vec.width || vec.interleave) {
        why = unsafeReason(l, vec);
        if (why.empty() && l->isInnermost() && (vec.width > 1 || vec.interleave > 1) &&
            boundedDependence(l))
          why = "a loop-carried memory dependence with a bounded safe distance: "
                "forced factors could break it";
      }
      if (!why.empty()) {
        ore.emit([&] {
          return OptimizationRemarkMissed(kPassName, "Unsafe", l->getStartLoc(),
                                          l->getHeader())
                 << describe(id, vec) << " not applied: " << why;
        });
        vec = Factors();
      }
      // unrolling never reorders what the loop computes; a pragma stands
      if (unroll.unroll && hasUnrollHints(old)) {
        ore.emit([&] {
          return OptimizationRemarkMissed(kPassName, "UserPragma", l->getStartLoc(),
                                          l->getHeader())
                 << describe(id, unroll)
                 << " not applied: the source has an unroll pragma for it";
        });
        unroll = Factors();
      }
      if (!vec.width && !vec.interleave && !unroll.unroll) continue;
      Type *i32 = Type::getInt32Ty(ctx);
      SmallVector<Metadata *, 3> add;
      SmallVector<StringRef, 3> drop;
      if (vec.width) {
        drop.push_back("llvm.loop.vectorize.width");
        add.push_back(MDNode::get(
            ctx, {MDString::get(ctx, "llvm.loop.vectorize.width"),
                  ConstantAsMetadata::get(ConstantInt::get(i32, vec.width))}));
      }
      if (vec.interleave) {
        drop.push_back("llvm.loop.interleave.count");
        add.push_back(MDNode::get(
            ctx,
            {MDString::get(ctx, "llvm.loop.interleave.count"),
             ConstantAsMetadata::get(ConstantInt::get(i32, vec.interleave))}));
      }
      if (unroll.unroll == 1) {
        add.push_back(MDNode::get(ctx, {MDString::get(ctx, "llvm.loop.unroll.disable")}));
      } else if (unroll.unroll) {
        // the vector loop keeps it (the vectorizer copies the loop's hints)
        add.push_back(MDNode::get(
            ctx, {MDString::get(ctx, "llvm.loop.unroll.count"),
                  ConstantAsMetadata::get(ConstantInt::get(i32, unroll.unroll))}));
      }
      Factors done = vec;
      done.unroll = unroll.unroll;
      std::string text = describe(id, done);  // before `old` is replaced
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


// ---------------------------------------------------------------------------
// Function versions (FORMAT.md, "Function versions")

constexpr int kSiteVersion = 1;   // runtime/adapt/mirecc_adapt.c SITE_VERSION
constexpr int kSiteVersions = 4;  // its FLAG_VERSIONS
// the descriptor's fields a dispatch reads: sched holds the version the
// runtime handed to the fast path + 1 (0: none), chunk the calls left on it
constexpr unsigned kSiteFast = 5, kSiteLeft = 6, kSiteTrip = 7;
constexpr int kVersionShift = 24;  // its TOKEN_VERSION_SHIFT

// Why `f` cannot become a dispatch over clones of itself, or "".
std::string cannotVersion(Function &f) {
  if (f.isDeclaration() || f.hasAvailableExternallyLinkage())
    return "no definition in this module";
  if (f.isVarArg()) return "a variadic function";
  if (f.hasFnAttribute(Attribute::Naked)) return "a naked function";
  // an exception would leave the runtime's site busy: nothing timed again
  if (!f.doesNotThrow()) return "it may throw";
  for (Argument &a : f.args())
    if (a.hasInAllocaAttr() || a.hasPreallocatedAttr() || a.hasSwiftErrorAttr() ||
        a.hasAttribute(Attribute::SwiftSelf) || a.hasAttribute(Attribute::SwiftAsync))
      return "an argument passed in a way a call cannot forward";
  for (BasicBlock &bb : f) {
    if (bb.hasAddressTaken()) return "a block whose address is taken";
    for (Instruction &i : bb) {
      if (auto *call = dyn_cast<CallInst>(&i))
        if (call->isMustTailCall()) return "a musttail call";
      if (Function *callee = mirecc::calleeOf(i))
        if (callee->getName() == "__kmpc_fork_call")
          return "it holds an OpenMP parallel region (adapt_openmp decides those)";
    }
  }
  return "";
}

// `f`'s body becomes a dispatch over the versions, clones of the body as it
// was (<f>.mirecc.v0: LLVM's own, unchanged):
//   if (size != site.trip) site.trip = size, site.sched = 0
//                                     ; size: the largest argument bounding
//                                     ; its loops (boundingArguments)
//   if (site.sched && site.chunk > 0) ; the fast path the runtime opened for
//     site.chunk--, v = site.sched - 1, tok = 0   ; a decided version
//   else tok = __mirecc_version_begin(&site), v = tok >> 24 & 0x7f
//                                     ; 0: the runtime is not linked
//   r = <f>.mirecc.v<v>(args...)
//   if (tok) __mirecc_adapt_end(&site, tok)
//   return r
// A noinline `f` (called as clang would call it) has its slow path (the
// `else` on) in <f>.mirecc.ask (noinline, cold) and tail-calls the version
// on the fast path: no register saved, no frame.  Another calls each
// version from one place, so that the inliner folds the versions into the
// dispatch and the dispatch into its callers, with their constants, as it
// would have folded `f`.
Function *cloneOf(Function &f, const Twine &name) {
  ValueToValueMapTy vmap;
  Function *c = CloneFunction(&f, vmap);
  c->setName(name);
  c->setLinkage(GlobalValue::InternalLinkage);
  c->setVisibility(GlobalValue::DefaultVisibility);
  c->setDLLStorageClass(GlobalValue::DefaultStorageClass);
  c->setComdat(nullptr);
  c->setUnnamedAddr(GlobalValue::UnnamedAddr::Global);
  return c;
}

void dropBody(Function &f) {
  for (BasicBlock &bb : f) bb.dropAllReferences();
  while (!f.empty()) f.begin()->eraseFromParent();
}

// A call of `callee` with `g`'s arguments, as `g` is called; its result
// returned (`tail`: a tail call) or handed to `done`'s phi.
CallInst *forward(IRBuilder<> &b, Function &g, Function *callee, bool tail) {
  SmallVector<Value *, 8> args;
  for (Argument &a : g.args()) args.push_back(&a);
  CallInst *r = b.CreateCall(callee, args);
  r->setCallingConv(callee->getCallingConv());
  r->setAttributes(callee->getAttributes());
  if (tail) {
    r->setTailCall();
    if (g.getReturnType()->isVoidTy()) b.CreateRetVoid();
    else b.CreateRet(r);
  }
  return r;
}

// The arguments that bound `f`'s loops: an integer argument an exit
// compare of one of its loops reads (through the alloca clang keeps it in
// before mem2reg, and casts).  Their largest is a call's size, the
// runtime's input-size bucket; an argument that is a position or a flag
// (zlib's longest_match(s, cur_match)) would move the bucket on every call.
std::vector<unsigned> boundingArguments(Function &f, LoopInfo &li) {
  auto argumentOf = [&](Value *v) -> Argument * {
    for (int depth = 0; depth < 4 && v; ++depth) {
      if (auto *a = dyn_cast<Argument>(v))
        return a->getType()->isIntegerTy() ? a : nullptr;
      if (auto *c = dyn_cast<CastInst>(v)) {
        v = c->getOperand(0);
        continue;
      }
      auto *load = dyn_cast<LoadInst>(v);
      auto *slot = load ? dyn_cast<AllocaInst>(load->getPointerOperand()) : nullptr;
      if (!slot) return nullptr;
      Value *stored = nullptr;   // the one store to the slot: a parameter's spill
      for (User *u : slot->users())
        if (auto *st = dyn_cast<StoreInst>(u)) {
          if (stored || st->getPointerOperand() != slot) return nullptr;
          stored = st->getValueOperand();
        }
      v = stored;
    }
    return nullptr;
  };
  std::vector<unsigned> out;
  for (Loop *l : li.getLoopsInPreorder()) {
    SmallVector<BasicBlock *, 4> exiting;
    l->getExitingBlocks(exiting);
    for (BasicBlock *bb : exiting) {
      auto *br = dyn_cast<BranchInst>(bb->getTerminator());
      auto *cmp = br && br->isConditional() ? dyn_cast<ICmpInst>(br->getCondition()) : nullptr;
      if (!cmp) continue;
      for (Value *op : cmp->operands())
        if (Argument *a = argumentOf(op))
          if (!is_contained(out, a->getArgNo())) out.push_back(a->getArgNo());
    }
  }
  return out;
}

GlobalVariable *makeVersions(Module &m, Function &f, const VersionSet &set,
                             const std::vector<unsigned> &sizeArgs) {
  LLVMContext &ctx = m.getContext();
  std::vector<Function *> clones;
  for (size_t i = 0; i <= set.names.size(); ++i) {
    const std::string tag = i ? set.tags[i - 1] : std::string();
    clones.push_back(cloneOf(f, f.getName() + kVersionSuffix + std::to_string(i) +
                                    (tag.empty() ? "" : "." + tag)));
    // on a 64-byte boundary: the clone's loops then sit as they would at
    // the start of a cache line, whatever the versions before it (LLVM's
    // own version of a held-out kernel placed 32 bytes off ran 8% slower
    // than clang's identical function; aligned, 2%)
    clones.back()->setAlignment(Align(64));
    if (!tag.empty()) {
      // out of line: it keeps its name for the late passes a flag names
      clones.back()->removeFnAttr(Attribute::AlwaysInline);
      clones.back()->addFnAttr(Attribute::NoInline);
    }
  }
  // A noinline function (called, not inlined, as clang would): its slow
  // path in a clone of its own, so that the fast path is a tail call.
  // Another: each version called from one place in the dispatch, so that
  // the inliner folds them into it and the dispatch into its callers, with
  // their constants, as it would have folded the function.
  bool outOfLine = f.hasFnAttribute(Attribute::NoInline);
  Function *ask = nullptr;
  if (outOfLine) {
    // for its signature, attributes and subprogram
    ask = cloneOf(f, f.getName() + ".mirecc.ask");
    dropBody(*ask);
    ask->addFnAttr(Attribute::Cold);
  }
  // the dispatch keeps the function's name, linkage, attributes and
  // subprogram; its body goes
  dropBody(f);

  Type *i32 = Type::getInt32Ty(ctx), *i64 = Type::getInt64Ty(ctx);
  auto *i32t = cast<IntegerType>(i32);
  std::string cands;
  for (const std::string &n : set.names) cands += (cands.empty() ? "" : " ") + n;
  Constant *keyStr = mirecc::cString(m, set.key);
  Type *charPtr = keyStr->getType();
  StructType *type = mirecc::siteType(ctx, charPtr);
  auto *site = new GlobalVariable(
      m, type, /*isConstant=*/false, GlobalValue::PrivateLinkage,
      ConstantStruct::get(
          type, {ConstantInt::get(i32, kSiteVersion), ConstantInt::get(i32, kSiteVersions),
                 keyStr, mirecc::cString(m, set.name), mirecc::cString(m, cands),
                 ConstantInt::get(i32, 0), ConstantInt::get(i32, 0),
                 ConstantInt::get(i64, -1),
                 ConstantPointerNull::get(cast<PointerType>(charPtr))}),
      ".mirecc.version.site");
  site->setAlignment(Align(8));
  auto field = [&](IRBuilder<> &at, unsigned index) {
    return at.CreateStructGEP(type, site, index);
  };
  // a builder's calls located at `g`'s line (a call of an inlinable function
  // with debug information needs a location)
  auto locate = [&](Function &g, IRBuilder<> &at) {
    if (DISubprogram *sp = g.getSubprogram())
      at.SetCurrentDebugLocation(DILocation::get(ctx, sp->getLine(), 0, sp));
  };
  // one block per version, calling it; `tail`: returning what it returns;
  // no `otherwise`: any other value runs version 0
  auto versions = [&](Function &g, IRBuilder<> &b, Value *which, BasicBlock *otherwise,
                      bool tail, BasicBlock *done, PHINode *result) {
    std::vector<BasicBlock *> blocks;
    for (size_t i = 0; i < clones.size(); ++i)
      blocks.push_back(BasicBlock::Create(ctx, "v" + std::to_string(i), &g, done));
    SwitchInst *sw = b.CreateSwitch(which, otherwise ? otherwise : blocks[0], clones.size());
    for (size_t i = 0; i < clones.size(); ++i) {
      BasicBlock *bb = blocks[i];
      if (otherwise || i) sw->addCase(ConstantInt::get(i32t, i), bb);
      IRBuilder<> v(bb);
      locate(g, v);
      CallInst *r = forward(v, g, clones[i], tail);
      if (!tail) {
        v.CreateBr(done);
        if (result) result->addIncoming(r, bb);
      }
    }
  };

  Function *begin = mirecc::weakCaller(m, "__mirecc_version_begin",
                                       FunctionType::get(i32, {charPtr}, false));
  Function *end = mirecc::weakCaller(
      m, "__mirecc_adapt_end", FunctionType::get(Type::getVoidTy(ctx), {charPtr, i32}, false));
  // after the version: the runtime's end, for a call it started
  auto finishAt = [&](Function &g, IRBuilder<> &b, Value *sitePtr, Value *token,
                      PHINode *result) {
    auto *finish = BasicBlock::Create(ctx, "end", &g);
    auto *out = BasicBlock::Create(ctx, "ret", &g);
    b.CreateCondBr(b.CreateICmpNE(token, ConstantInt::get(i32, 0)), finish, out);
    b.SetInsertPoint(finish);
    b.CreateCall(end, {sitePtr, token});
    b.CreateBr(out);
    b.SetInsertPoint(out);
    if (result) b.CreateRet(result);
    else b.CreateRetVoid();
  };
  // the slow path of a noinline function: ask the runtime, run its
  // version, tell it the end
  if (ask) {
    IRBuilder<> b(BasicBlock::Create(ctx, "entry", ask));
    locate(*ask, b);
    Value *sitePtr = b.CreatePointerCast(site, charPtr);
    Value *token = b.CreateCall(begin, {sitePtr}, "mirecc.version");
    Value *which = b.CreateAnd(b.CreateLShr(token, kVersionShift), 0x7f);
    auto *done = BasicBlock::Create(ctx, "done", ask);
    PHINode *result = nullptr;
    if (!ask->getReturnType()->isVoidTy()) {
      IRBuilder<> d(done);
      result = d.CreatePHI(ask->getReturnType(), clones.size(), "r");
    }
    // a token naming no version cannot come: LLVM's own
    auto *other = BasicBlock::Create(ctx, "other", ask, done);
    {
      IRBuilder<> o(other);
      locate(*ask, o);
      CallInst *r = forward(o, *ask, clones[0], false);
      o.CreateBr(done);
      if (result) result->addIncoming(r, other);
    }
    versions(*ask, b, which, other, false, done, result);
    b.SetInsertPoint(done);
    finishAt(*ask, b, sitePtr, token, result);
  }

  // the dispatch
  IRBuilder<> b(BasicBlock::Create(ctx, "entry", &f));
  locate(f, b);
  // the call's size: the largest argument bounding its loops (the
  // runtime's buckets); none: one bucket
  Value *size = nullptr;
  for (unsigned n : sizeArgs) {
    Argument &a = *f.getArg(n);
    auto *t = dyn_cast<IntegerType>(a.getType());
    if (!t || t->getBitWidth() < 8 || t->getBitWidth() > 64) continue;
    Value *v = a.hasZExtAttr() ? b.CreateZExt(&a, i64) : b.CreateSExt(&a, i64);
    size = size ? b.CreateSelect(b.CreateICmpSGT(v, size), v, size) : v;
  }
  auto *call = BasicBlock::Create(ctx, "call", &f);
  if (size) {
    // stored only when it changed (a function called from many threads
    // would otherwise pass the descriptor's cache line between cores); a
    // new size closes the fast path: the runtime decides for it
    auto *store = BasicBlock::Create(ctx, "size", &f, call);
    LoadInst *old = b.CreateAlignedLoad(i64, field(b, kSiteTrip), Align(8));
    old->setAtomic(AtomicOrdering::Monotonic);
    b.CreateCondBr(b.CreateICmpNE(old, size), store, call);
    b.SetInsertPoint(store);
    b.CreateAlignedStore(size, field(b, kSiteTrip), Align(8))
        ->setAtomic(AtomicOrdering::Monotonic);
    b.CreateAlignedStore(ConstantInt::get(i32, 0), field(b, kSiteFast), Align(4))
        ->setAtomic(AtomicOrdering::Monotonic);
  }
  b.CreateBr(call);
  b.SetInsertPoint(call);
  auto *check = BasicBlock::Create(ctx, "fast.left", &f);
  auto *take = BasicBlock::Create(ctx, "fast", &f);
  auto *slow = BasicBlock::Create(ctx, "ask", &f);
  LoadInst *fast = b.CreateAlignedLoad(i32, field(b, kSiteFast), Align(4), "fast");
  fast->setAtomic(AtomicOrdering::Acquire);
  b.CreateCondBr(b.CreateICmpNE(fast, ConstantInt::get(i32, 0)), check, slow);
  b.SetInsertPoint(check);
  LoadInst *left = b.CreateAlignedLoad(i32, field(b, kSiteLeft), Align(4), "left");
  left->setAtomic(AtomicOrdering::Monotonic);
  b.CreateCondBr(b.CreateICmpSGT(left, ConstantInt::get(i32, 0)), take, slow);
  b.SetInsertPoint(take);
  b.CreateAlignedStore(b.CreateSub(left, ConstantInt::get(i32, 1)), field(b, kSiteLeft),
                       Align(4))->setAtomic(AtomicOrdering::Monotonic);
  Value *fastWhich = b.CreateSub(fast, ConstantInt::get(i32, 1));
  if (ask) {
    versions(f, b, fastWhich, slow, true, nullptr, nullptr);
    IRBuilder<> a(slow);
    locate(f, a);
    forward(a, f, ask, true);
    return site;
  }
  auto *dispatch = BasicBlock::Create(ctx, "dispatch", &f);
  b.CreateBr(dispatch);
  IRBuilder<> a(slow);
  locate(f, a);
  Value *sitePtr = a.CreatePointerCast(site, charPtr);
  Value *asked = a.CreateCall(begin, {sitePtr}, "mirecc.version");
  Value *askedWhich = a.CreateAnd(a.CreateLShr(asked, kVersionShift), 0x7f);
  a.CreateBr(dispatch);
  b.SetInsertPoint(dispatch);
  PHINode *token = b.CreatePHI(i32, 2, "token");
  token->addIncoming(ConstantInt::get(i32, 0), take);
  token->addIncoming(asked, slow);
  PHINode *which = b.CreatePHI(i32, 2, "which");
  which->addIncoming(fastWhich, take);
  which->addIncoming(askedWhich, slow);
  auto *done = BasicBlock::Create(ctx, "done", &f);
  PHINode *result = nullptr;
  if (!f.getReturnType()->isVoidTy()) {
    IRBuilder<> d(done);
    result = d.CreatePHI(f.getReturnType(), clones.size(), "r");
  }
  versions(f, b, which, nullptr, false, done, result);
  b.SetInsertPoint(done);
  finishAt(f, b, sitePtr, token, result);
  return site;
}

// The module's sites handed to the runtime before main (a constructor
// calling __mirecc_version_prepare(&site) for each, through its weak
// helper): the runtime reads its settings and store and sets each site up
// there, not in the first call of the function, which may be timed (a
// kernel run once per process) and finds its caches cold.
void prepareAtStart(Module &m, ArrayRef<GlobalVariable *> sites) {
  if (sites.empty()) return;
  LLVMContext &ctx = m.getContext();
  // the descriptor's key field: i8* on typed-pointer LLVM, ptr on opaque
  Type *charPtr = cast<StructType>(sites[0]->getValueType())->getElementType(2);
  Function *prepare = mirecc::weakCaller(
      m, "__mirecc_version_prepare",
      FunctionType::get(Type::getVoidTy(ctx), {charPtr}, false));
  Function *ctor = Function::Create(FunctionType::get(Type::getVoidTy(ctx), false),
                                    GlobalValue::InternalLinkage, ".mirecc.versions.prepare", &m);
  ctor->addFnAttr(Attribute::NoUnwind);
  ctor->addFnAttr(Attribute::Cold);
  ctor->addFnAttr(Attribute::NoInline);
  IRBuilder<> b(BasicBlock::Create(ctx, "entry", ctor));
  for (GlobalVariable *site : sites) b.CreateCall(prepare, {b.CreatePointerCast(site, charPtr)});
  b.CreateRetVoid();
  appendToGlobalCtors(m, ctor, 65535);
}

struct VersionsPass : PassInfoMixin<VersionsPass> {
  PreservedAnalyses run(Module &m, ModuleAnalysisManager &mam) {
    const Decisions &d = decisions();
    if (!d.ok || d.versions.empty()) return PreservedAnalyses::all();
    auto &fam =
        mam.getResult<FunctionAnalysisManagerModuleProxy>(m).getManager();
    bool changed = false;
    std::vector<GlobalVariable *> sites;
    for (const std::string &key : {m.getSourceFileName(), std::string("*")}) {
      auto mv = d.versions.find(key);
      if (mv == d.versions.end()) continue;
      for (const auto &kv : mv->second) {
        Function *f = m.getFunction(kv.first());
        if (!f || f->isDeclaration()) continue;
        std::string why = cannotVersion(*f);
        if (why.empty() && m.getFunction(f->getName().str() + kVersionSuffix + "0"))
          why = "its versions exist already";
        auto &ore = fam.getResult<OptimizationRemarkEmitterAnalysis>(*f);
        DiagnosticLocation where(f->getSubprogram());
        if (!why.empty()) {
          ore.emit([&] {
            return OptimizationRemarkMissed(kPassName, "NotVersioned", where,
                                            &f->getEntryBlock())
                   << "function " << f->getName() << ": not versioned: " << why;
          });
          continue;
        }
        const VersionSet &set = kv.second;
        std::string names;
        for (const std::string &n : set.names) names += (names.empty() ? "" : ", ") + n;
        ore.emit([&] {
          return OptimizationRemark(kPassName, "Versioned", where, &f->getEntryBlock())
                 << "function " << f->getName() << ": " << std::to_string(set.names.size() + 1)
                 << " versions (LLVM's, " << names << "), chosen at run time";
        });
        std::vector<unsigned> sizeArgs =
            boundingArguments(*f, fam.getResult<LoopAnalysis>(*f));
        fam.clear(*f, f->getName());
        sites.push_back(makeVersions(m, *f, set, sizeArgs));
        changed = true;
      }
    }
    prepareAtStart(m, sites);
    return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
  }
};

}  // namespace

bool mirecc::decisionsLoaded() { return decisions().ok; }

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "mirecc-loophints", "1",
          [](PassBuilder &pb) {
            // call sites marked first: the versions' clones copy the marks
            mirecc::registerCallPasses(pb);
            pb.registerPipelineStartEPCallback(
                [](ModulePassManager &mpm, OptimizationLevel level) {
                  if (level == OptimizationLevel::O0) return;
                  mpm.addPass(VersionsPass());  // its clones' loops marked next
                  mpm.addPass(LoopMarkPass());
                });
            pb.registerVectorizerStartEPCallback(
                [](FunctionPassManager &fpm, OptimizationLevel) {
                  fpm.addPass(LoopHintsPass());
                });
            pb.registerPipelineParsingCallback(
                [](StringRef name, ModulePassManager &mpm,
                   ArrayRef<PassBuilder::PipelineElement>) {
                  if (name == "mirecc-versions") {
                    mpm.addPass(VersionsPass());
                    return true;
                  }
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
