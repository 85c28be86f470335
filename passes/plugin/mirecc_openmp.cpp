// mirecc-omp-decide: OpenMP runtime decisions from the mirecc decisions file
// (the "openmp" key of a module entry, FORMAT.md), part of the
// mirecc-loophints plugin.
//
// A module pass at pipeline start (after mirecc-loop-mark), also named for
// opt. The IR is still as clang emitted it, so calls are numbered as in the
// -disable-llvm-passes IR: "<function>:<index>", index counting the calls of
// one kind in the function, in instruction order.
//
//  * parallel (the __kmpc_fork_call calls), "threads": n pushes n threads for
//    that region, unless OMP_NUM_THREADS is set at run time, the source has a
//    num_threads clause for it, or the module calls omp_set_num_threads.
//  * worksharing (the __kmpc_for_static_init_{4,4u,8,8u} calls), "schedule"
//    and "chunk": turns a loop that clang scheduled statically by default
//    (schedule type 34, no schedule clause) into a dispatch loop
//    (__kmpc_dispatch_init/next) with the chosen schedule; with OMP_SCHEDULE
//    set at run time it dispatches as kmp_sch_static, one block per thread.
//  * adapt (fork calls), "key", "candidates", "loops": an adaptive site of
//    the runtime in runtime/adapt, which chooses the team size and the
//    schedule of the named loops per invocation (makeAdaptiveSite).
//
// Anything else (an explicit schedule, lastprivate/linear, nowait,
// cancellation, IR not shaped as expected) is left alone with an
// -Rpass-missed=mirecc-loophints remark saying why.
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Analysis/OptimizationRemarkEmitter.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Support/JSON.h"

#include "mirecc_plugin.h"
#include <cstdint>
#include <map>
#include <vector>
#include <string>

using namespace llvm;

// Shared with mirecc_loophints.cpp (declared in both files; no header, so
// that the plugin's source stays *.cpp + CMakeLists.txt + *.md).
namespace {

constexpr const char *kPassName = "mirecc-loophints";
constexpr int64_t kMaxThreads = 1024;
constexpr int64_t kMaxChunk = INT32_MAX;

// libomp's enum sched_type (kmp.h).
constexpr int kSchStaticChunked = 33;
constexpr int kSchStatic = 34;
constexpr int kSchDynamicChunked = 35;
constexpr int kSchGuidedChunked = 36;

constexpr const char *kStaticInitPrefix = "__kmpc_for_static_init_";

struct Schedule {
  std::string name;  // "static" | "dynamic" | "guided"; "" = not decided
  int64_t chunk = 0;  // 0 = not given
  int kind() const {
    if (name == "dynamic") return kSchDynamicChunked;
    if (name == "guided") return kSchGuidedChunked;
    return chunk ? kSchStaticChunked : kSchStatic;
  }
  // The chunk passed to __kmpc_dispatch_init: libomp's default chunk (1) for
  // dynamic/guided, ignored for unchunked static.
  int64_t dispatchChunk() const {
    if (chunk) return chunk;
    return name == "static" ? 0 : 1;
  }
  std::string describe() const {
    std::string s = "schedule=" + name;
    if (chunk) s += " chunk=" + std::to_string(chunk);
    return s;
  }
};

// An adaptive site (FORMAT.md, "Adaptive sites"): the runtime chooses.
struct AdaptSite {
  std::string key;         // the region's code digest
  std::string name;        // "<source>:<line> <region id>", for listings
  std::string candidates;  // space-separated, in the head's order
  std::vector<std::string> loops;  // worksharing call ids it may reschedule
};

struct FunctionDecisions {
  std::map<int64_t, int64_t> threads;      // fork call index -> threads
  std::map<int64_t, Schedule> worksharing;  // static init index -> schedule
  std::map<int64_t, AdaptSite> adapt;       // fork call index -> site
};

// module key (source_filename or "*") -> function name -> decisions
std::map<std::string, StringMap<FunctionDecisions>> &store() {
  static std::map<std::string, StringMap<FunctionDecisions>> s;
  return s;
}

bool hasPrefix(StringRef s, StringRef prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

using mirecc::calleeOf;
using mirecc::cString;
using mirecc::newHelper;
using mirecc::siteType;
using mirecc::weakCaller;

StringRef calleeName(const Instruction &i) {
  Function *f = calleeOf(i);
  return f ? f->getName() : StringRef();
}

bool isStaticInit(StringRef n) {
  if (!hasPrefix(n, kStaticInitPrefix)) return false;
  StringRef suffix = n.substr(StringRef(kStaticInitPrefix).size());
  return suffix == "4" || suffix == "4u" || suffix == "8" || suffix == "8u";
}

bool isFork(StringRef n) { return n == "__kmpc_fork_call"; }

// A call that starts a worksharing construct of its own (not __kmpc_fork_*:
// a nested parallel region runs in its own function, and may be in a loop).
bool startsWorksharing(StringRef n) {
  return hasPrefix(n, "__kmpc_for_static_init") ||
         hasPrefix(n, "__kmpc_dist_for_static_init") ||
         hasPrefix(n, "__kmpc_dispatch_init") || n == "__kmpc_single" ||
         n == "__kmpc_sections_init";
}

bool isBarrier(StringRef n) {
  return n == "__kmpc_barrier" || n == "__kmpc_cancel_barrier";
}

// Runtime calls that clang emits between a loop and its barrier for the
// loop's own clauses (reductions); anything else of the runtime there is
// user code that does not wait for the loop.
bool isReductionRuntime(StringRef n) {
  return hasPrefix(n, "__kmpc_reduce") || hasPrefix(n, "__kmpc_end_reduce") ||
         n == "__kmpc_critical" || n == "__kmpc_critical_with_hint" ||
         n == "__kmpc_end_critical" || hasPrefix(n, "__kmpc_atomic_") ||
         n == "__kmpc_global_thread_num";
}

// The decisions of `fn`: those under the module's own key win over "*".
FunctionDecisions decisionsFor(StringRef module, StringRef fn) {
  FunctionDecisions out;
  for (const std::string &key : {module.str(), std::string("*")}) {
    auto m = store().find(key);
    if (m == store().end()) continue;
    auto f = m->second.find(fn);
    if (f == m->second.end()) continue;
    out.threads.insert(f->second.threads.begin(), f->second.threads.end());
    out.worksharing.insert(f->second.worksharing.begin(),
                           f->second.worksharing.end());
    out.adapt.insert(f->second.adapt.begin(), f->second.adapt.end());
  }
  return out;
}

// ---------------------------------------------------------------------------
// Helpers defined in the module

// `getenv(name) != NULL`, built at `b`.
Value *envIsSet(Module &m, IRBuilder<> &b, StringRef name) {
  Constant *str = cString(m, name);
  Type *charPtr = str->getType();
  FunctionCallee getenv = m.getOrInsertFunction(
      "getenv", FunctionType::get(charPtr, {charPtr}, false));
  Value *v = b.CreateCall(getenv, {str});
  if (v->getType() != charPtr) v = b.CreateBitCast(v, charPtr);
  return b.CreateICmpNE(v,
                        ConstantPointerNull::get(cast<PointerType>(charPtr)));
}

// The runtime entry `name` with `type`; a new declaration is nounwind, as
// clang declares the runtime's entries.
FunctionCallee runtimeFunction(Module &m, StringRef name, FunctionType *type) {
  bool existed = m.getFunction(name) != nullptr;
  FunctionCallee callee = m.getOrInsertFunction(name, type);
  if (!existed)
    if (auto *f = dyn_cast<Function>(callee.getCallee()))
      f->addFnAttr(Attribute::NoUnwind);
  return callee;
}

// void __mirecc_omp_push_threads(ident_t *loc, i32 n):
//   if (!getenv("OMP_NUM_THREADS"))
//     __kmpc_push_num_threads(loc, __kmpc_global_thread_num(loc), n);
Function *makePushThreads(Module &m, Type *identTy) {
  LLVMContext &ctx = m.getContext();
  Type *i32 = Type::getInt32Ty(ctx);
  Function *f = newHelper(
      m, "__mirecc_omp_push_threads",
      FunctionType::get(Type::getVoidTy(ctx), {identTy, i32}, false));
  Value *loc = f->getArg(0), *n = f->getArg(1);
  auto *entry = BasicBlock::Create(ctx, "entry", f);
  auto *push = BasicBlock::Create(ctx, "push", f);
  auto *done = BasicBlock::Create(ctx, "done", f);
  IRBuilder<> b(entry);
  b.CreateCondBr(envIsSet(m, b, "OMP_NUM_THREADS"), done, push);
  b.SetInsertPoint(push);
  FunctionCallee gtidFn = runtimeFunction(
      m, "__kmpc_global_thread_num", FunctionType::get(i32, {identTy}, false));
  FunctionCallee pushFn = runtimeFunction(
      m, "__kmpc_push_num_threads",
      FunctionType::get(Type::getVoidTy(ctx), {identTy, i32, i32}, false));
  Value *gtid = b.CreateCall(gtidFn, {loc});
  b.CreateCall(pushFn, {loc, gtid, n});
  b.CreateBr(done);
  b.SetInsertPoint(done);
  b.CreateRetVoid();
  return f;
}

// i1 __mirecc_omp_user_schedule(void): getenv("OMP_SCHEDULE") != NULL
Function *makeUserSchedule(Module &m) {
  LLVMContext &ctx = m.getContext();
  Function *f = newHelper(m, "__mirecc_omp_user_schedule",
                          FunctionType::get(Type::getInt1Ty(ctx), false));
  IRBuilder<> b(BasicBlock::Create(ctx, "entry", f));
  b.CreateRet(envIsSet(m, b, "OMP_SCHEDULE"));
  return f;
}

// ---------------------------------------------------------------------------
// Analysis

// Functions whose return ends a parallel region (its join barrier follows):
// the microtasks passed to __kmpc_fork_*, and functions called only from
// them (clang's `_debug__` bodies with -g).
SmallPtrSet<const Function *, 8> regionFunctions(Module &m) {
  SmallPtrSet<const Function *, 8> regions;
  for (Function &rt : m) {
    if (!hasPrefix(rt.getName(), "__kmpc_fork")) continue;
    for (User *u : rt.users()) {
      auto *cb = dyn_cast<CallBase>(u);
      if (!cb || calleeOf(*cb) != &rt || cb->arg_size() <= 2) continue;
      if (auto *task =
              dyn_cast<Function>(cb->getArgOperand(2)->stripPointerCasts()))
        regions.insert(task);
    }
  }
  SmallVector<const Function *, 8> outlined(regions.begin(), regions.end());
  for (Function &f : m) {
    if (f.isDeclaration() || !f.hasLocalLinkage() || regions.count(&f))
      continue;
    bool onlyFromRegions = !f.use_empty();
    for (const Use &u : f.uses()) {
      auto *cb = dyn_cast<CallBase>(u.getUser());
      if (!cb || !cb->isCallee(&u) ||
          !is_contained(outlined, cb->getFunction())) {
        onlyFromRegions = false;
        break;
      }
    }
    if (onlyFromRegions) regions.insert(&f);
  }
  return regions;
}

// Whether a __kmpc_push_num_threads call (a num_threads clause) precedes
// `fork` after the previous fork call: in its block, and up through single
// predecessors (with an if clause, clang pushes before the branch).
bool numThreadsClause(CallBase *fork) {
  BasicBlock *bb = fork->getParent();
  Instruction *from = fork->getPrevNode();
  SmallPtrSet<BasicBlock *, 8> seen;
  while (true) {
    for (Instruction *i = from; i; i = i->getPrevNode()) {
      StringRef n = calleeName(*i);
      if (hasPrefix(n, "__kmpc_push_num_threads")) return true;
      if (isFork(n)) return false;
    }
    if (!seen.insert(bb).second) return false;
    bb = bb->getSinglePredecessor();
    if (!bb) return false;
    from = &bb->back();
  }
}

bool isLifetime(const User *u) {
  if (const auto *ii = dyn_cast<IntrinsicInst>(u))
    return ii->getIntrinsicID() == Intrinsic::lifetime_start ||
           ii->getIntrinsicID() == Intrinsic::lifetime_end;
  return false;
}

// What a worksharing rewrite needs: the init call, its fini, and the
// region between them.
struct Plan {
  CallInst *init = nullptr;
  CallInst *fini = nullptr;
};

class StaticLoopCheck {
 public:
  StaticLoopCheck(CallInst *init,
                  const SmallPtrSet<const Function *, 8> &regions)
      : init(init), fn(*init->getFunction()), regions(regions) {}

  // "" and `plan` filled, or why the loop is not rewritten.
  std::string run(Plan &plan) {
    if (init->arg_size() != 9)
      return "unexpected __kmpc_for_static_init arguments";
    auto *sched = dyn_cast<ConstantInt>(init->getArgOperand(2));
    if (!sched)
      return "its schedule type is not a constant";
    if (sched->getSExtValue() != kSchStatic)
      return "the loop has a schedule clause (schedule type " +
             std::to_string(sched->getSExtValue()) + ")";
    for (BasicBlock &bb : fn)
      for (Instruction &i : bb) {
        StringRef n = calleeName(i);
        if (n == "__kmpc_cancel" || n == "__kmpc_cancellationpoint" ||
            n == "__kmpc_cancel_barrier")
          return "the function uses OpenMP cancellation";
      }
    if (std::string why = findRegion(); !why.empty()) return why;
    if (std::string why = checkPointers(); !why.empty()) return why;
    if (std::string why = checkEscapes(); !why.empty()) return why;
    if (std::string why = checkBarrierAfter(); !why.empty()) return why;
    plan.init = init;
    plan.fini = fini;
    return "";
  }

 private:
  CallInst *init;
  Function &fn;
  const SmallPtrSet<const Function *, 8> &regions;
  CallInst *fini = nullptr;
  SmallPtrSet<BasicBlock *, 16> blocks;  // the region's blocks (see inRegion)

  // Whether `i` runs between the init call and the fini call: after the
  // init in its block, before the fini in its block, or in a block between.
  bool inRegion(const Instruction *i) const {
    const BasicBlock *bb = i->getParent();
    if (bb == init->getParent()) return init->comesBefore(i);
    if (!blocks.count(bb)) return false;
    return bb != fini->getParent() || i->comesBefore(fini);
  }

  // Walks the CFG from the init: every path must reach one and the same
  // __kmpc_for_static_fini before leaving the function or starting another
  // worksharing construct.
  std::string findRegion() {
    SmallPtrSet<CallInst *, 2> finis;
    SmallVector<std::pair<BasicBlock *, Instruction *>, 16> work;
    work.push_back({init->getParent(), init->getNextNode()});
    while (!work.empty()) {
      auto [bb, first] = work.pop_back_val();
      bool stopped = false;
      for (Instruction *i = first; i && !stopped; i = i->getNextNode()) {
        StringRef n = calleeName(*i);
        if (n == "__kmpc_for_static_fini") {
          auto *call = dyn_cast<CallInst>(i);
          if (!call) return "unexpected: an invoke of __kmpc_for_static_fini";
          finis.insert(call);
          stopped = true;
        } else if (startsWorksharing(n)) {
          return "another OpenMP construct (" + n.str() +
                 ") starts before the loop's __kmpc_for_static_fini";
        } else if (isa<ReturnInst>(i) || isa<ResumeInst>(i)) {
          return "a path from the loop leaves it without "
                 "__kmpc_for_static_fini";
        }
      }
      if (stopped) continue;
      for (BasicBlock *succ : successors(bb))
        if (blocks.insert(succ).second) work.push_back({succ, &succ->front()});
    }
    if (finis.size() != 1)
      return finis.empty()
                 ? "the loop does not reach a __kmpc_for_static_fini"
                 : "the loop reaches " + std::to_string(finis.size()) +
                       " __kmpc_for_static_fini calls";
    fini = *finis.begin();
    if (fini->getParent() == init->getParent())
      return "unexpected: __kmpc_for_static_fini in the init's block";
    // Nothing may enter the region on a way to the fini other than through
    // the init (dead ends such as a shared terminate landing pad may be
    // shared with code outside).
    SmallPtrSet<BasicBlock *, 32> reachable;
    SmallVector<BasicBlock *, 32> stack{&fn.getEntryBlock()};
    reachable.insert(&fn.getEntryBlock());
    while (!stack.empty())
      for (BasicBlock *s : successors(stack.pop_back_val()))
        if (reachable.insert(s).second) stack.push_back(s);
    SmallPtrSet<BasicBlock *, 16> toFini{fini->getParent()};
    stack.assign(1, fini->getParent());
    while (!stack.empty())
      for (BasicBlock *pred : predecessors(stack.pop_back_val())) {
        if (!reachable.count(pred)) continue;
        if (pred != init->getParent() && !blocks.count(pred))
          return "unexpected: code outside the loop jumps into it";
        if (blocks.count(pred) && toFini.insert(pred).second)
          stack.push_back(pred);
      }
    return "";
  }

  // The loop's bound, stride and last-iteration variables are the runtime's
  // to write; the loop reads the bounds. A read of the last-iteration flag
  // (lastprivate, linear) or a bound read after the loop depends on a static
  // partition.
  std::string checkPointers() {
    struct Arg {
      unsigned index;
      bool loopMayRead;
    } args[] = {{3, false}, {4, true}, {5, true}, {6, true}};
    for (const Arg &a : args) {
      Value *p = init->getArgOperand(a.index);
      for (User *u : p->users()) {
        if (u == init || isLifetime(u)) continue;
        if (auto *st = dyn_cast<StoreInst>(u))
          if (st->getPointerOperand() == p && st->getValueOperand() != p)
            continue;
        if (auto *ld = dyn_cast<LoadInst>(u))
          if (a.loopMayRead && inRegion(ld)) continue;
        if (auto *bc = dyn_cast<BitCastInst>(u))  // typed pointers
          if (all_of(bc->users(), isLifetime)) continue;
        if (a.index == 3)
          return "the loop reads its last-iteration flag (lastprivate or "
                 "linear clause)";
        return "unexpected use of the loop's bounds or stride";
      }
    }
    return "";
  }

  // The rewrite makes the code after the loop no longer dominated by the
  // loop body: no value computed in the loop may be used after it (the fini
  // call, which goes, may use them).
  std::string checkEscapes() {
    auto check = [&](Instruction &i) {
      for (User *u : i.users()) {
        auto *ui = dyn_cast<Instruction>(u);
        if (!ui || (ui != fini && !inRegion(ui))) return false;
      }
      return true;
    };
    for (Instruction *i = init->getNextNode(); i; i = i->getNextNode())
      if (!check(*i)) return "a value computed in the loop is used after it";
    for (BasicBlock *bb : blocks)
      for (Instruction &i : *bb) {
        if (&i == fini) break;
        if (!check(i)) return "a value computed in the loop is used after it";
      }
    return "";
  }

  // Without a barrier after the loop (nowait), code that follows in the
  // region could rely on the static iteration-to-thread mapping.
  std::string checkBarrierAfter() {
    const char *nowait =
        "no barrier follows the loop (nowait): later code in the region may "
        "rely on its static iteration-to-thread mapping";
    SmallPtrSet<BasicBlock *, 16> seen;
    SmallVector<std::pair<BasicBlock *, Instruction *>, 16> work;
    work.push_back({fini->getParent(), fini->getNextNode()});
    while (!work.empty()) {
      auto [bb, first] = work.pop_back_val();
      bool stopped = false;
      for (Instruction *i = first; i && !stopped; i = i->getNextNode()) {
        StringRef n = calleeName(*i);
        if (isBarrier(n)) {
          stopped = true;
        } else if (isa<ReturnInst>(i)) {
          if (!regions.count(&fn)) return nowait;
          stopped = true;  // the end of the parallel region
        } else if (i == init || (hasPrefix(n, "__kmpc_") &&
                                 !isReductionRuntime(n))) {
          return nowait;
        } else if (isa<ResumeInst>(i)) {
          return nowait;
        }
      }
      if (stopped) continue;
      for (BasicBlock *succ : successors(bb))
        if (seen.insert(succ).second) work.push_back({succ, &succ->front()});
    }
    return "";
  }
};

// ---------------------------------------------------------------------------
// Rewrites

// The static loop `plan` becomes a dispatch loop:
//
//   lb0 = *plb; ub0 = *pub
//   __kmpc_dispatch_init_X(loc, gtid, user ? 34 : sched, lb0, ub0, incr,
//                          user ? 0 : chunk)      ; user: OMP_SCHEDULE is set
//   br next
// next:
//   if (__kmpc_dispatch_next_X(loc, gtid, plast, plb, pub, pst)) br body
//   else br done
// body: (clang's code after the init: clamp ub, iv = lb, the loop)
//   ... br next                                   ; was: the fini call
// done: (clang's code after the fini call)
// `schedule` builds the (schedule type, chunk) values at the builder's
// position, typed as the dispatch init's arguments.
void rewriteLoop(
    const Plan &plan,
    function_ref<std::pair<Value *, Value *>(IRBuilder<> &, Type *, Type *)>
        schedule) {
  CallInst *init = plan.init, *fini = plan.fini;
  Module &m = *init->getModule();
  LLVMContext &ctx = m.getContext();
  const DataLayout &dl = m.getDataLayout();
  StringRef suffix =
      calleeName(*init).substr(StringRef(kStaticInitPrefix).size());
  Value *loc = init->getArgOperand(0), *gtid = init->getArgOperand(1);
  Value *plast = init->getArgOperand(3), *plb = init->getArgOperand(4);
  Value *pub = init->getArgOperand(5), *pst = init->getArgOperand(6);
  Value *incr = init->getArgOperand(7), *chunkArg = init->getArgOperand(8);
  Type *schedTy = init->getArgOperand(2)->getType();
  Type *ivTy = incr->getType();  // kmp_int32 / kmp_int64, as the bounds
  Type *chunkTy = chunkArg->getType();
  Type *i32 = Type::getInt32Ty(ctx);

  FunctionCallee dispatchInit = runtimeFunction(
      m, ("__kmpc_dispatch_init_" + suffix).str(),
      FunctionType::get(Type::getVoidTy(ctx),
                        {loc->getType(), gtid->getType(), schedTy, ivTy, ivTy,
                         incr->getType(), chunkTy},
                        false));
  FunctionCallee dispatchNext = runtimeFunction(
      m, ("__kmpc_dispatch_next_" + suffix).str(),
      FunctionType::get(i32,
                        {loc->getType(), gtid->getType(), plast->getType(),
                         plb->getType(), pub->getType(), pst->getType()},
                        false));

  BasicBlock *initBB = init->getParent();
  BasicBlock *body =
      initBB->splitBasicBlock(init->getNextNode(), "omp.dispatch.body");
  BasicBlock *finiBB = fini->getParent();
  BasicBlock *done = finiBB->splitBasicBlock(fini, "omp.dispatch.end");
  BasicBlock *next =
      BasicBlock::Create(ctx, "omp.dispatch.next", initBB->getParent(), body);

  IRBuilder<> b(init);
  b.SetCurrentDebugLocation(init->getDebugLoc());
  Align align = dl.getABITypeAlign(ivTy);
  Value *lb = b.CreateAlignedLoad(ivTy, plb, align, "omp.lb");
  Value *ub = b.CreateAlignedLoad(ivTy, pub, align, "omp.ub");
  auto [sched, chunk] = schedule(b, schedTy, chunkTy);
  b.CreateCall(dispatchInit, {loc, gtid, sched, lb, ub, incr, chunk});
  initBB->getTerminator()->setSuccessor(0, next);

  b.SetInsertPoint(next);
  Value *more = b.CreateCall(dispatchNext, {loc, gtid, plast, plb, pub, pst},
                             "omp.more");
  b.CreateCondBr(b.CreateICmpNE(more, ConstantInt::get(i32, 0)), body, done);
  finiBB->getTerminator()->setSuccessor(0, next);

  init->eraseFromParent();
  fini->eraseFromParent();
}


// ---------------------------------------------------------------------------
// Adaptive sites (FORMAT.md, "Adaptive sites"; the runtime: runtime/adapt)

constexpr unsigned kSiteSched = 5, kSiteChunk = 6, kSiteTrip = 7;
constexpr int kSiteVersion = 1;
constexpr int kSiteRewritten = 1, kSiteTeamFixed = 2;
constexpr int kTokenCopy = 0x10000;

// Before each of `fn`'s worksharing inits: the loop's trip count into the
// site's `trip` (ub - lb + 1: a static init's bounds as clang stores them
// before the call; a dispatch init's are its arguments).
void storeTrips(Function &fn, GlobalVariable *site, StructType *type) {
  SmallVector<CallInst *, 4> inits;
  for (BasicBlock &bb : fn)
    for (Instruction &i : bb) {
      StringRef n = calleeName(i);
      auto *call = dyn_cast<CallInst>(&i);
      if (call && ((isStaticInit(n) && call->arg_size() == 9) ||
                   (hasPrefix(n, "__kmpc_dispatch_init_") && call->arg_size() == 7)))
        inits.push_back(call);
    }
  const DataLayout &dl = fn.getParent()->getDataLayout();
  for (CallInst *init : inits) {
    IRBuilder<> b(init);
    StringRef n = calleeName(*init);
    bool isStatic = isStaticInit(n);
    Value *lb, *ub;
    if (isStatic) {
      Type *ivTy = init->getArgOperand(7)->getType();
      Align align = dl.getABITypeAlign(ivTy);
      lb = b.CreateAlignedLoad(ivTy, init->getArgOperand(4), align);
      ub = b.CreateAlignedLoad(ivTy, init->getArgOperand(5), align);
    } else {
      lb = init->getArgOperand(3);
      ub = init->getArgOperand(4);
    }
    Type *i64 = b.getInt64Ty();
    bool isUnsigned = !n.empty() && n.back() == 'u';
    Value *lo = isUnsigned ? b.CreateZExt(lb, i64) : b.CreateSExt(lb, i64);
    Value *hi = isUnsigned ? b.CreateZExt(ub, i64) : b.CreateSExt(ub, i64);
    Value *trip = b.CreateAdd(b.CreateSub(hi, lo), b.getInt64(1));
    Value *field = b.CreateStructGEP(type, site, kSiteTrip);
    // stored only when it changed: every thread of the team runs this, and
    // a store of the same value would still take the descriptor's cache
    // line from the other cores on every invocation
    LoadInst *old = b.CreateAlignedLoad(i64, field, Align(8));
    old->setAtomic(AtomicOrdering::Monotonic);
    Instruction *then = SplitBlockAndInsertIfThen(b.CreateICmpNE(old, trip), init, false);
    IRBuilder<> t(then);
    StoreInst *st = t.CreateAlignedStore(trip, field, Align(8));
    st->setAtomic(AtomicOrdering::Monotonic);
  }
}

// The fork `fork` becomes an adaptive site:
//   tok = begin(&site, loc)          ; pushes the team size, sets sched/chunk
//   fork(loc, n, tok & COPY ? copy : microtask, ...)
//   end(&site, tok)                  ; times the region
// where `copy` is the microtask with its static loops turned into dispatch
// loops that read the site's sched/chunk.  "" or why not.
std::string makeAdaptiveSite(Module &m, CallBase *fork, const AdaptSite &want,
                             bool teamFixed,
                             SmallPtrSet<const Function *, 8> &regions,
                             std::string &what) {
  if (!isa<CallInst>(fork)) return "unexpected: an invoke of __kmpc_fork_call";
  if (fork->arg_size() < 3) return "unexpected __kmpc_fork_call arguments";
  auto *microtask =
      dyn_cast<Function>(fork->getArgOperand(2)->stripPointerCasts());
  if (!microtask || microtask->isDeclaration())
    return "the region's outlined function is not in the module";
  LLVMContext &ctx = m.getContext();
  Type *i32 = Type::getInt32Ty(ctx);
  Constant *keyStr = cString(m, want.key);
  Type *charPtr = keyStr->getType();
  StructType *type = siteType(ctx, charPtr);
  auto *site = new GlobalVariable(m, type, /*isConstant=*/false,
                                  GlobalValue::PrivateLinkage, nullptr,
                                  ".mirecc.adapt.site");
  site->setAlignment(Align(8));

  // The copy whose static loops dispatch with the site's schedule.
  int rewritten = 0;
  Function *copy = nullptr;
  // the static inits the decision names (call ids "<microtask>:<index>")
  SmallVector<CallInst *, 4> inits;
  int64_t index = 0;
  for (BasicBlock &bb : *microtask)
    for (Instruction &i : bb)
      if (isStaticInit(calleeName(i))) {
        std::string id =
            microtask->getName().str() + ":" + std::to_string(index++);
        auto *call = dyn_cast<CallInst>(&i);
        if (call && is_contained(want.loops, id)) inits.push_back(call);
      }
  if (!inits.empty()) {
    ValueToValueMapTy vmap;
    copy = CloneFunction(microtask, vmap);
    copy->setName(microtask->getName() + ".mirecc.adapt");
    copy->setLinkage(GlobalValue::InternalLinkage);
    regions.insert(copy);
    SmallVector<CallInst *, 4> copies;
    for (CallInst *init : inits)
      copies.push_back(cast<CallInst>(vmap[init]));
    for (CallInst *init : copies) {
      Plan plan;
      if (!StaticLoopCheck(init, regions).run(plan).empty()) continue;
      rewriteLoop(plan, [&](IRBuilder<> &b, Type *schedTy, Type *chunkTy) {
        Value *sched = b.CreateAlignedLoad(
            i32, b.CreateStructGEP(type, site, kSiteSched), Align(4));
        Value *chunk = b.CreateAlignedLoad(
            i32, b.CreateStructGEP(type, site, kSiteChunk), Align(4));
        return std::make_pair(b.CreateZExtOrTrunc(sched, schedTy),
                              b.CreateSExtOrTrunc(chunk, chunkTy));
      });
      rewritten++;
    }
    if (!rewritten) {
      regions.erase(copy);
      copy->eraseFromParent();
      copy = nullptr;
    } else {
      storeTrips(*copy, site, type);
    }
  }
  if (teamFixed && !copy) {
    site->eraseFromParent();
    return "the source fixes the team size and no loop's schedule can change";
  }
  storeTrips(*microtask, site, type);
  int flags = (copy ? kSiteRewritten : 0) | (teamFixed ? kSiteTeamFixed : 0);
  site->setInitializer(ConstantStruct::get(
      type, {ConstantInt::get(i32, kSiteVersion), ConstantInt::get(i32, flags),
             keyStr, cString(m, want.name), cString(m, want.candidates),
             ConstantInt::get(i32, 0), ConstantInt::get(i32, 0),
             ConstantInt::get(Type::getInt64Ty(ctx), -1),
             ConstantPointerNull::get(cast<PointerType>(charPtr))}));

  Value *loc = fork->getArgOperand(0);
  Function *begin = weakCaller(
      m, "__mirecc_adapt_begin",
      FunctionType::get(i32, {charPtr, loc->getType()}, false));
  Function *end = weakCaller(
      m, "__mirecc_adapt_end",
      FunctionType::get(Type::getVoidTy(ctx), {charPtr, i32}, false));
  IRBuilder<> b(fork);
  b.SetCurrentDebugLocation(fork->getDebugLoc());
  Value *sitePtr = b.CreatePointerCast(site, charPtr);
  if (begin->getFunctionType()->getParamType(1) != loc->getType())
    return "unexpected: two ident_t types in one module";
  Value *token = b.CreateCall(begin, {sitePtr, loc}, "mirecc.adapt");
  if (copy) {
    Value *useCopy = b.CreateICmpNE(
        b.CreateAnd(token, ConstantInt::get(i32, kTokenCopy)),
        ConstantInt::get(i32, 0));
    Value *task = fork->getArgOperand(2);
    fork->setArgOperand(
        2, b.CreateSelect(useCopy, b.CreatePointerCast(copy, task->getType()),
                          task));
  }
  b.SetInsertPoint(fork->getNextNode());
  b.CreateCall(end, {sitePtr, token});
  what += ": " + std::to_string(rewritten) + " loop" +
          (rewritten == 1 ? "" : "s") + " with adaptive schedules" +
          (teamFixed ? ", team size fixed by the source" : "");
  return "";
}

struct OpenMPDecidePass : PassInfoMixin<OpenMPDecidePass> {
  PreservedAnalyses run(Module &m, ModuleAnalysisManager &mam) {
    if (!mirecc::decisionsLoaded() || store().empty())
      return PreservedAnalyses::all();
    // An offload device module has the host's source_filename but its own
    // runtime (and no getenv): the decisions are for the host code.
    if (m.getModuleFlag("openmp-device")) return PreservedAnalyses::all();
    auto &fam =
        mam.getResult<FunctionAnalysisManagerModuleProxy>(m).getManager();
    StringRef module = m.getSourceFileName();
    SmallPtrSet<const Function *, 8> regions = regionFunctions(m);
    Function *setNumThreads = m.getFunction("omp_set_num_threads");
    bool programSetsThreads = setNumThreads && !setNumThreads->use_empty();
    DenseMap<Type *, Function *> pushThreads;  // per ident_t* type
    Function *userSchedule = nullptr;
    bool changed = false;

    SmallVector<Function *, 16> functions;
    for (Function &fn : m)
      if (!fn.isDeclaration()) functions.push_back(&fn);
    for (Function *fnp : functions) {
      Function &fn = *fnp;
      FunctionDecisions wanted = decisionsFor(module, fn.getName());
      if (wanted.threads.empty() && wanted.worksharing.empty() &&
          wanted.adapt.empty())
        continue;
      // The calls, numbered before anything changes.
      SmallVector<CallBase *, 8> forks, inits;
      for (BasicBlock &bb : fn)
        for (Instruction &i : bb) {
          StringRef n = calleeName(i);
          if (isFork(n)) forks.push_back(cast<CallBase>(&i));
          else if (isStaticInit(n)) inits.push_back(cast<CallBase>(&i));
        }
      auto &ore = fam.getResult<OptimizationRemarkEmitterAnalysis>(fn);
      auto idOf = [&](int64_t index) {
        return fn.getName().str() + ":" + std::to_string(index);
      };
      auto noSuchCall = [&](const char *kind, int64_t index,
                            const char *call) {
        ore.emit([&] {
          DiagnosticLocation where(fn.getSubprogram());
          return OptimizationRemarkMissed(kPassName, "NoSuchCall", where,
                                          &fn.getEntryBlock())
                 << kind << " " << idOf(index) << ": no " << call
                 << " call with that index; decision ignored";
        });
      };
      auto missed = [&](Instruction *at, const std::string &text) {
        ore.emit([&] {
          return OptimizationRemarkMissed(kPassName, "NotApplied", at) << text;
        });
      };

      for (const auto &[index, threads] : wanted.threads) {
        if (index >= (int64_t)forks.size()) {
          noSuchCall("parallel", index, "__kmpc_fork_call");
          continue;
        }
        CallBase *fork = forks[index];
        std::string what = "parallel " + idOf(index) +
                           ": threads=" + std::to_string(threads);
        std::string why;
        if (numThreadsClause(fork))
          why = "the source has a num_threads clause for it";
        else if (programSetsThreads)
          why = "the module calls omp_set_num_threads";
        if (!why.empty()) {
          missed(fork, what + " not applied: " + why);
          continue;
        }
        Value *loc = fork->getArgOperand(0);
        Function *&helper = pushThreads[loc->getType()];
        if (!helper) helper = makePushThreads(m, loc->getType());
        IRBuilder<> b(fork);
        b.SetCurrentDebugLocation(fork->getDebugLoc());
        b.CreateCall(helper,
                     {loc, ConstantInt::get(Type::getInt32Ty(m.getContext()),
                                            threads)});
        ore.emit([&] {
          return OptimizationRemark(kPassName, "Applied", fork) << what;
        });
        changed = true;
      }

      for (const auto &[index, schedule] : wanted.worksharing) {
        if (index >= (int64_t)inits.size()) {
          noSuchCall("worksharing", index, "__kmpc_for_static_init");
          continue;
        }
        CallBase *call = inits[index];
        std::string what =
            "worksharing " + idOf(index) + ": " + schedule.describe();
        Plan plan;
        std::string why;
        if (auto *init = dyn_cast<CallInst>(call))
          why = StaticLoopCheck(init, regions).run(plan);
        else
          why = "unexpected: an invoke of __kmpc_for_static_init";
        if (!why.empty()) {
          missed(call, what + " not applied: " + why);
          continue;
        }
        ore.emit([&] {
          return OptimizationRemark(kPassName, "Applied", call) << what;
        });
        if (!userSchedule) userSchedule = makeUserSchedule(m);
        const Schedule chosen = schedule;  // (a structured binding: not captured before C++20)
        rewriteLoop(plan, [&](IRBuilder<> &b, Type *schedTy, Type *chunkTy) {
          Value *user = b.CreateCall(userSchedule, {}, "omp.user.schedule");
          Value *sched =
              b.CreateSelect(user, ConstantInt::get(schedTy, kSchStatic),
                             ConstantInt::get(schedTy, chosen.kind()));
          Value *chunk = b.CreateSelect(
              user, ConstantInt::get(chunkTy, 0),
              ConstantInt::get(chunkTy, chosen.dispatchChunk()));
          return std::make_pair(sched, chunk);
        });
        changed = true;
      }

      for (const auto &[index, site] : wanted.adapt) {
        if (index >= (int64_t)forks.size()) {
          noSuchCall("adapt", index, "__kmpc_fork_call");
          continue;
        }
        CallBase *fork = forks[index];
        std::string what = "adapt " + idOf(index);
        bool teamFixed = numThreadsClause(fork) || programSetsThreads;
        std::string why = makeAdaptiveSite(m, fork, site, teamFixed, regions,
                                           what);
        if (!why.empty()) {
          missed(fork, what + " not applied: " + why);
          continue;
        }
        ore.emit([&] {
          return OptimizationRemark(kPassName, "Applied", fork) << what;
        });
        changed = true;
      }
    }
    return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
  }
};


// "half-dynamic-64": a share of the cores, a schedule, a chunk or "default".
bool validCandidate(StringRef text) {
  SmallVector<StringRef, 3> parts;
  text.split(parts, '-');
  if (parts.size() != 3) return false;
  if (parts[0] != "one" && parts[0] != "quarter" && parts[0] != "half" &&
      parts[0] != "all")
    return false;
  if (parts[1] != "static" && parts[1] != "dynamic" && parts[1] != "guided")
    return false;
  int64_t chunk;
  if (parts[2] == "default") return true;
  return !parts[2].getAsInteger(10, chunk) && chunk >= 1 && chunk <= (1 << 30);
}

}  // namespace

namespace mirecc {

std::string parseOpenMPDecisions(StringRef module, const json::Object &openmp,
                                 const std::string &where) {
  StringMap<FunctionDecisions> &functions = store()[module.str()];
  for (const auto &kv : openmp) {
    StringRef kind = kv.first;
    std::string w = where + ".openmp[\"" + kind.str() + "\"]";
    if (kind != "parallel" && kind != "worksharing" && kind != "adapt")
      return where + ".openmp: unknown key \"" + kind.str() + "\"";
    const json::Object *calls = kv.second.getAsObject();
    if (!calls) return w + ": expected an object";
    for (const auto &ckv : *calls) {
      StringRef id = ckv.first;
      std::string cw = w + "[\"" + id.str() + "\"]";
      auto [fn, indexText] = id.rsplit(':');
      int64_t index;
      if (fn.empty() || indexText.getAsInteger(10, index) || index < 0)
        return cw + ": an OpenMP call id is <function>:<index>";
      const json::Object *entry = ckv.second.getAsObject();
      if (!entry) return cw + ": expected an object";
      FunctionDecisions &f = functions[fn];
      if (kind == "adapt") {
        AdaptSite site;
        bool hasKey = false, hasCandidates = false;
        for (const auto &e : *entry) {
          StringRef key = e.first;
          if (key == "key" || key == "name") {
            auto v = e.second.getAsString();
            if (!v || v->empty() || v->size() > 512 ||
                v->find_first_of("\t\n\r") != StringRef::npos ||
                (key == "key" && v->find(' ') != StringRef::npos))
              return cw + ": " + key.str() +
                     " must be a short one-line string" +
                     (key == "key" ? " without spaces" : "");
            (key == "key" ? site.key : site.name) = v->str();
            hasKey |= key == "key";
          } else if (key == "loops") {
            const json::Array *list = e.second.getAsArray();
            if (!list) return cw + ": loops must be a list of call ids";
            for (const json::Value &l : *list) {
              auto v = l.getAsString();
              if (!v || v->rsplit(':').first.empty())
                return cw + ": loops must be a list of call ids";
              site.loops.push_back(v->str());
            }
          } else if (key == "candidates") {
            const json::Array *list = e.second.getAsArray();
            if (!list || list->empty() || list->size() > 8)
              return cw + ": candidates must be a list of 1..8 configurations";
            for (const json::Value &c : *list) {
              auto v = c.getAsString();
              if (!v || !validCandidate(*v))
                return cw + ": a candidate is <one|quarter|half|all>-"
                            "<static|dynamic|guided>-<default|chunk>";
              if (!site.candidates.empty()) site.candidates += " ";
              site.candidates += v->str();
            }
            hasCandidates = true;
          } else {
            return cw + ": unknown key \"" + key.str() + "\"";
          }
        }
        if (!hasKey || !hasCandidates)
          return cw + ": an adaptive site needs key and candidates";
        f.adapt[index] = site;
        continue;
      }
      if (kind == "parallel") {
        for (const auto &e : *entry) {
          if (StringRef(e.first) != "threads")
            return cw + ": unknown key \"" + StringRef(e.first).str() + "\"";
          auto v = e.second.getAsInteger();
          if (!v || *v < 1 || *v > kMaxThreads)
            return cw + ": threads must be an integer in 1.." +
                   std::to_string(kMaxThreads);
          f.threads[index] = *v;
        }
        continue;
      }
      Schedule s;
      bool chunkGiven = false;
      for (const auto &e : *entry) {
        StringRef key = e.first;
        if (key == "schedule") {
          auto v = e.second.getAsString();
          if (!v || (*v != "static" && *v != "dynamic" && *v != "guided"))
            return cw + ": schedule must be \"static\", \"dynamic\" or "
                        "\"guided\"";
          s.name = v->str();
        } else if (key == "chunk") {
          auto v = e.second.getAsInteger();
          if (!v || *v < 1 || *v > kMaxChunk)
            return cw + ": chunk must be an integer in 1.." +
                   std::to_string(kMaxChunk);
          s.chunk = *v;
          chunkGiven = true;
        } else {
          return cw + ": unknown key \"" + key.str() + "\"";
        }
      }
      if (s.name.empty()) {
        if (chunkGiven) return cw + ": chunk without schedule";
        continue;  // {}: nothing decided
      }
      f.worksharing[index] = s;
    }
  }
  return "";
}

void clearOpenMPDecisions() { store().clear(); }

void registerOpenMPPasses(PassBuilder &pb) {
  // Registered after mirecc-loop-mark's callback, so it runs after it (the
  // loop ids count blocks; this pass adds some).
  pb.registerPipelineStartEPCallback(
      [](ModulePassManager &mpm, OptimizationLevel level) {
        if (level != OptimizationLevel::O0) mpm.addPass(OpenMPDecidePass());
      });
  pb.registerPipelineParsingCallback(
      [](StringRef name, ModulePassManager &mpm,
         ArrayRef<PassBuilder::PipelineElement>) {
        if (name != "mirecc-omp-decide") return false;
        mpm.addPass(OpenMPDecidePass());
        return true;
      });
}

// ---------------------------------------------------------------------------
// Helpers defined in a module, shared with mirecc_loophints.cpp (function
// versions): declared in mirecc_plugin.h

// A char* to a private NUL-terminated copy of `text`.
Constant *cString(Module &m, StringRef text) {
  LLVMContext &ctx = m.getContext();
  Constant *data = ConstantDataArray::getString(ctx, text, /*AddNull=*/true);
  auto *gv = new GlobalVariable(m, data->getType(), /*isConstant=*/true,
                                GlobalValue::PrivateLinkage, data,
                                ".mirecc.env." + text);
  gv->setUnnamedAddr(GlobalValue::UnnamedAddr::Global);
  gv->setAlignment(Align(1));
  Type *i64 = Type::getInt64Ty(ctx);
  Constant *zero = ConstantInt::get(i64, 0);
  Constant *idx[] = {zero, zero};
  // i8* on typed-pointer LLVM, ptr on opaque-pointer LLVM.
  return ConstantExpr::getInBoundsGetElementPtr(data->getType(), gv, idx);
}


Function *newHelper(Module &m, StringRef name, FunctionType *type) {
  Function *f =
      Function::Create(type, GlobalValue::InternalLinkage, name, &m);
  f->addFnAttr(Attribute::NoUnwind);
  return f;
}


// The site descriptor's type, as runtime/adapt/mirecc_adapt.c declares it:
// {i32 version, i32 flags, char *key, char *name, char *cands, i32 sched,
//  i32 chunk, i64 trip, char *state}.
StructType *siteType(LLVMContext &ctx, Type *charPtr) {
  Type *i32 = Type::getInt32Ty(ctx), *i64 = Type::getInt64Ty(ctx);
  return StructType::get(ctx, {i32, i32, charPtr, charPtr, charPtr, i32, i32,
                               i64, charPtr});
}

// A call of the weak runtime entry `name` through a module-local helper that
// returns 0 when the runtime is not linked in (fail-open: the program's own
// configuration).
Function *weakCaller(Module &m, StringRef name, FunctionType *type) {
  std::string helperName = ("__mirecc_weak" + name).str();
  if (Function *f = m.getFunction(helperName)) return f;
  LLVMContext &ctx = m.getContext();
  Function *callee = m.getFunction(name);
  if (!callee) {
    callee = Function::Create(type, GlobalValue::ExternalWeakLinkage, name, &m);
    callee->addFnAttr(Attribute::NoUnwind);
  }
  Function *f = newHelper(m, helperName, type);
  auto *entry = BasicBlock::Create(ctx, "entry", f);
  auto *call = BasicBlock::Create(ctx, "call", f);
  auto *none = BasicBlock::Create(ctx, "none", f);
  IRBuilder<> b(entry);
  b.CreateCondBr(b.CreateIsNotNull(callee), call, none);
  b.SetInsertPoint(call);
  SmallVector<Value *, 2> args;
  for (Argument &a : f->args()) args.push_back(&a);
  Value *r = b.CreateCall(FunctionCallee(type, callee), args);
  if (type->getReturnType()->isVoidTy()) b.CreateRetVoid();
  else b.CreateRet(r);
  b.SetInsertPoint(none);
  if (type->getReturnType()->isVoidTy()) b.CreateRetVoid();
  else b.CreateRet(Constant::getNullValue(type->getReturnType()));
  return f;
}


}  // namespace mirecc
