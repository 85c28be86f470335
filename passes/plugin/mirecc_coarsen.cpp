// mirecc-coarsen: OpenCL thread coarsening on a kernel's LLVM IR, part of
// mirecc's pass plugin (FORMAT.md "Thread coarsening").
//
//   opt -load-pass-plugin mirecc-plugin-19.so \
//       -passes='mirecc-coarsen<kernel=sgemm;factor=4;dim=0;mode=consecutive>'
//
// For factor k along dimension d each work-item of the coarsened kernel does
// the work of k work-items of the original: the kernel's body moves into an
// internal function with one more parameter (the sub-item s, 0..k-1), and the
// kernel calls it k times. In the body
//   get_global_id(d)   -> consecutive: off + (id - off) * k + s
//                         strided:     id + s * get_global_size(d)
//   get_global_size(d) -> get_global_size(d) * k
//   consecutive only:  get_local_id(d) -> id * k + s, get_local_size(d) -> size * k
// (id, off: the launch's own values; the host launches global size / k along
// d, and local size / k where it gives one: work-groups keep their items and
// their ids). Work-items of the original then run one after another in one
// work-item, which is what OpenCL allows wherever nothing makes them wait
// for each other, so the kernel is refused, unchanged, with a reason on
// stderr where something does: a barrier or work-group / sub-group function,
// a work-item function whose dimension is not a constant,
// get_enqueued_local_size along d, get_local_id / get_local_size /
// get_group_id along d in the strided form (its work-groups are not the old
// ones), a reqd_work_group_size along d that k does not divide (one it
// divides is divided), a function that is no kernel or that other code
// calls, local memory (a
// __local argument or a local global), or a function the module defines
// that the kernel calls and that calls work-item functions itself.
//
// One line per kernel named on stderr:
//   mirecc-coarsen: <kernel>: factor <k> dim <d> <mode>
//   mirecc-coarsen: <kernel>: refused: <reason>
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/ValueMapper.h"

#include "mirecc_plugin.h"
#include <string>
#include <vector>

using namespace llvm;

namespace {

struct CoarsenOptions {
  std::string kernel;
  unsigned factor = 1;
  unsigned dim = 0;
  bool strided = false;
};

// The Itanium-mangled name's prefix clang gives an OpenCL builtin.
std::string mangledPrefix(StringRef base) {
  return "_Z" + std::to_string(base.size()) + base.str();
}

// Whether f is the OpenCL builtin ``base`` (mangled, or a C-style declaration).
bool named(const Function *f, StringRef base) {
  if (!f) return false;
  StringRef n = f->getName();
  std::string prefix = mangledPrefix(base);
  return n == base || n.substr(0, prefix.size()) == prefix;
}

bool isWorkItem(const Function *f) {
  for (const char *n : {"get_global_id", "get_global_size", "get_global_offset",
                        "get_local_id", "get_group_id", "get_local_size",
                        "get_num_groups", "get_enqueued_local_size",
                        "get_global_linear_id", "get_local_linear_id", "get_work_dim"})
    if (named(f, n)) return true;
  return false;
}

bool waits(const Function *f) {
  if (!f) return false;
  StringRef n = f->getName();
  return named(f, "barrier") || n.contains("work_group_") || n.contains("sub_group_") ||
         n.contains("__spirv_ControlBarrier");
}

// Whether a function the module defines reaches a work-item or waiting
// function through its calls (the kernel's own calls are checked apart).
bool reachesWorkItems(const Function *f, SmallPtrSet<const Function *, 16> &seen) {
  if (!f || f->isDeclaration() || !seen.insert(f).second) return false;
  for (const Instruction &i : instructions(*f))
    if (const Function *callee = mirecc::calleeOf(i))
      if (isWorkItem(callee) || waits(callee) || reachesWorkItems(callee, seen)) return true;
  return false;
}

// Whether the kernel takes local memory (SPIR's address space 3 or the
// kernel_arg_addr_space metadata's 3, where the target has no address spaces).
bool takesLocalMemory(const Function &f) {
  for (const Argument &a : f.args())
    if (auto *p = dyn_cast<PointerType>(a.getType()))
      if (p->getAddressSpace() == 3) return true;
  if (MDNode *md = f.getMetadata("kernel_arg_addr_space"))
    for (const MDOperand &op : md->operands())
      if (auto *c = mdconst::dyn_extract_or_null<ConstantInt>(op))
        if (c->getZExtValue() == 3) return true;
  return false;
}

bool usesLocalGlobal(const Function &f) {
  for (const Instruction &i : instructions(f))
    for (const Use &u : i.operands()) {
      // through casts and constant GEPs (an element of a local array)
      if (auto *g = dyn_cast<GlobalVariable>(getUnderlyingObject(u.get())))
        if (g->getAddressSpace() == 3) return true;
    }
  return false;
}

// "" when the kernel can be coarsened along dim, else why not.
// The work-group size the kernel requires along dim (0: none given).
uint64_t requiredSize(const Function &f, unsigned dim) {
  if (MDNode *md = f.getMetadata("reqd_work_group_size"))
    if (dim < md->getNumOperands())
      if (auto *c = mdconst::dyn_extract_or_null<ConstantInt>(md->getOperand(dim)))
        return c->getZExtValue();
  return 0;
}

std::string refusal(Function &f, const CoarsenOptions &o) {
  unsigned dim = o.dim;
  bool strided = o.strided;
  if (f.getCallingConv() != CallingConv::SPIR_KERNEL && !f.hasMetadata("kernel_arg_type") &&
      !f.hasMetadata("kernel_arg_addr_space"))
    return "not an OpenCL kernel (no spir_kernel convention, no kernel_arg_* metadata)";
  if (!f.use_empty()) return "called or referenced by other code (it would run the loop)";
  if (uint64_t r = requiredSize(f, dim); r % o.factor)
    return "its reqd_work_group_size " + std::to_string(r) + " is not a multiple of " +
           std::to_string(o.factor);
  if (takesLocalMemory(f)) return "takes local memory (a __local argument)";
  if (usesLocalGlobal(f)) return "uses local memory";
  for (Instruction &i : instructions(f)) {
    auto *call = dyn_cast<CallBase>(&i);
    if (!call) continue;
    Function *callee = mirecc::calleeOf(i);
    if (!callee) {
      if (!call->isInlineAsm()) continue;
      return "inline assembly";
    }
    StringRef n = callee->getName();
    if (waits(callee)) return ("calls " + n + " (work-items wait for each other)").str();
    if (isWorkItem(callee)) {
      if (named(callee, "get_work_dim") || named(callee, "get_global_linear_id") ||
          named(callee, "get_local_linear_id"))
        return ("calls " + n).str();
      auto *d = call->arg_size() ? dyn_cast<ConstantInt>(call->getArgOperand(0)) : nullptr;
      if (!d) return ("calls " + n + " with a dimension that is not a constant").str();
      if (named(callee, "get_enqueued_local_size") && d->getZExtValue() == dim)
        return ("calls " + n + " along the coarsened dimension").str();
      if (strided && d->getZExtValue() == dim &&
          (named(callee, "get_local_id") || named(callee, "get_local_size") ||
           named(callee, "get_group_id")))
        return ("calls " + n + " along the coarsened dimension (strided: work-groups "
                "would not keep their items)").str();
      continue;
    }
    SmallPtrSet<const Function *, 16> seen;
    if (reachesWorkItems(callee, seen))
      return ("calls " + n + ", which uses work-item or work-group functions").str();
  }
  return "";
}

// The builtin ``base`` with the type and naming of ``like`` (a call of
// get_global_id): a declaration of the module where it has one, else a new
// one, named as like's callee is (mangled with the same parameter suffix, or
// plain).
FunctionCallee sibling(Module &m, CallBase *like, StringRef base) {
  Function *callee = mirecc::calleeOf(*like);
  StringRef name = callee->getName();
  std::string own = mangledPrefix("get_global_id");
  std::string wanted = name.substr(0, own.size()) == own
                           ? mangledPrefix(base) + name.substr(own.size()).str()
                           : base.str();
  FunctionCallee fc = m.getOrInsertFunction(wanted, like->getFunctionType());
  if (auto *f = dyn_cast<Function>(fc.getCallee()))
    if (f->isDeclaration() && f->use_empty()) f->setCallingConv(callee->getCallingConv());
  return fc;
}

// The calling convention of the kernel's body: a function's, not a kernel's.
CallingConv::ID bodyConvention(CallingConv::ID kernel) {
  switch (kernel) {
    case CallingConv::SPIR_KERNEL: return CallingConv::SPIR_FUNC;
    case CallingConv::AMDGPU_KERNEL:
    case CallingConv::PTX_Kernel: return CallingConv::C;
    default: return kernel;
  }
}

// The rewrite: the kernel's body into an internal function with the
// sub-item as its last parameter, the kernel a loop over it.
void coarsen(Module &m, Function &kernel, const CoarsenOptions &o) {
  LLVMContext &ctx = m.getContext();
  FunctionType *ft = kernel.getFunctionType();
  Type *subTy = Type::getInt64Ty(ctx);  // each rewrite casts it to its call's size_t
  std::vector<Type *> params(ft->param_begin(), ft->param_end());
  params.push_back(subTy);
  // external until cloned (a local function cannot take a kernel's
  // hidden or protected visibility, which the clone copies)
  Function *body = Function::Create(FunctionType::get(ft->getReturnType(), params, false),
                                    GlobalValue::ExternalLinkage,
                                    kernel.getName() + ".mirecc.body", &m);
  ValueToValueMapTy vmap;
  auto dst = body->arg_begin();
  for (Argument &a : kernel.args()) {
    dst->setName(a.getName());
    vmap[&a] = &*dst++;
  }
  Argument *sub = &*dst;
  sub->setName("mirecc.sub");
  SmallVector<ReturnInst *, 4> returns;
  CloneFunctionInto(body, &kernel, vmap, CloneFunctionChangeType::LocalChangesOnly, returns);
  body->setVisibility(GlobalValue::DefaultVisibility);
  body->setLinkage(GlobalValue::InternalLinkage);
  body->setDSOLocal(true);
  body->setCallingConv(bodyConvention(kernel.getCallingConv()));
  // not a kernel: no kernel_arg_* metadata; inlined into the loop, unless
  // the kernel is not optimised (optnone), when both stay as they were
  SmallVector<std::pair<unsigned, MDNode *>, 8> mds;
  body->getAllMetadata(mds);
  for (auto &[kind, node] : mds)
    if (kind != LLVMContext::MD_dbg) body->setMetadata(kind, nullptr);
  if (!kernel.hasFnAttribute(Attribute::OptimizeNone)) {
    body->removeFnAttr(Attribute::NoInline);
    body->addFnAttr(Attribute::AlwaysInline);
  }

  std::vector<CallBase *> calls;
  for (Instruction &i : instructions(*body)) {
    Function *callee = mirecc::calleeOf(i);
    auto *call = dyn_cast<CallBase>(&i);
    auto *d = call && call->arg_size() ? dyn_cast<ConstantInt>(call->getArgOperand(0)) : nullptr;
    if (d && d->getZExtValue() == o.dim &&
        (named(callee, "get_global_id") || named(callee, "get_global_size") ||
         named(callee, "get_local_id") || named(callee, "get_local_size")))
      calls.push_back(call);
  }
  for (CallBase *call : calls) {
    Function *callee = mirecc::calleeOf(*call);
    IRBuilder<> b(call->getNextNode());
    Type *t = call->getType();
    Value *subT = b.CreateZExtOrTrunc(sub, t);
    Value *kT = ConstantInt::get(t, o.factor);
    // the call stays (the launch's own value); its uses take the new one
    std::vector<Use *> uses;
    for (Use &u : call->uses()) uses.push_back(&u);
    Value *v;
    if (named(callee, "get_global_size") || named(callee, "get_local_size")) {
      v = b.CreateMul(call, kT, "mirecc.size");
    } else if (named(callee, "get_local_id")) {
      v = b.CreateAdd(b.CreateMul(call, kT), subT, "mirecc.lid");  // consecutive only
    } else {
      CallInst *other = b.CreateCall(sibling(m, call, o.strided ? "get_global_size"
                                                                : "get_global_offset"),
                                     {call->getArgOperand(0)});
      other->setCallingConv(call->getCallingConv());
      if (o.strided)  // id + s * size
        v = b.CreateAdd(call, b.CreateMul(subT, other), "mirecc.gid");
      else            // off + (id - off) * k + s
        v = b.CreateAdd(b.CreateAdd(b.CreateMul(b.CreateSub(call, other), kT), subT), other,
                        "mirecc.gid");
    }
    for (Use *u : uses) u->set(v);
  }

  // the kernel: for (s = 0; s < k; s++) body(args..., s), its metadata kept
  // (deleteBody drops it), a required work-group size divided by k as the
  // host divides the local size
  SmallVector<std::pair<unsigned, MDNode *>, 8> kernelMds;
  kernel.getAllMetadata(kernelMds);
  kernel.deleteBody();
  for (auto &[kind, node] : kernelMds)
    if (kind != LLVMContext::MD_dbg) kernel.setMetadata(kind, node);
  if (uint64_t r = requiredSize(kernel, o.dim)) {
    MDNode *md = kernel.getMetadata("reqd_work_group_size");
    SmallVector<Metadata *, 3> sizes(md->op_begin(), md->op_end());
    auto *c = mdconst::extract<ConstantInt>(sizes[o.dim]);
    sizes[o.dim] = ConstantAsMetadata::get(ConstantInt::get(c->getType(), r / o.factor));
    kernel.setMetadata("reqd_work_group_size", MDNode::get(ctx, sizes));
  }
  BasicBlock *entry = BasicBlock::Create(ctx, "entry", &kernel);
  BasicBlock *loop = BasicBlock::Create(ctx, "mirecc.coarsen", &kernel);
  BasicBlock *exit = BasicBlock::Create(ctx, "mirecc.done", &kernel);
  IRBuilder<> b(entry);
  b.CreateBr(loop);
  b.SetInsertPoint(loop);
  PHINode *s = b.CreatePHI(subTy, 2, "mirecc.s");
  s->addIncoming(ConstantInt::get(subTy, 0), entry);
  std::vector<Value *> args;
  for (Argument &a : kernel.args()) args.push_back(&a);
  args.push_back(s);
  CallInst *call = b.CreateCall(body, args);
  call->setCallingConv(body->getCallingConv());
  Value *next = b.CreateAdd(s, ConstantInt::get(subTy, 1), "mirecc.next", true, true);
  s->addIncoming(next, loop);
  b.CreateCondBr(b.CreateICmpULT(next, ConstantInt::get(subTy, o.factor)), loop, exit);
  b.SetInsertPoint(exit);
  b.CreateRetVoid();
}

struct CoarsenPass : PassInfoMixin<CoarsenPass> {
  CoarsenOptions o;
  explicit CoarsenPass(CoarsenOptions opts) : o(std::move(opts)) {}

  PreservedAnalyses run(Module &m, ModuleAnalysisManager &) {
    Function *kernel = m.getFunction(o.kernel);
    if (!kernel || kernel->isDeclaration()) {
      errs() << "mirecc-coarsen: " << o.kernel << ": refused: no such kernel in the module\n";
      return PreservedAnalyses::all();
    }
    if (!kernel->getReturnType()->isVoidTy()) {
      errs() << "mirecc-coarsen: " << o.kernel << ": refused: not a kernel (returns a value)\n";
      return PreservedAnalyses::all();
    }
    std::string why = refusal(*kernel, o);
    if (!why.empty()) {
      errs() << "mirecc-coarsen: " << o.kernel << ": refused: " << why << "\n";
      return PreservedAnalyses::all();
    }
    if (o.factor > 1) coarsen(m, *kernel, o);
    errs() << "mirecc-coarsen: " << o.kernel << ": factor " << o.factor << " dim " << o.dim
           << (o.strided ? " strided" : " consecutive") << "\n";
    return o.factor > 1 ? PreservedAnalyses::none() : PreservedAnalyses::all();
  }
};

// "kernel=NAME;factor=K;dim=D;mode=consecutive|strided" -> options, or an error.
std::string parseOptions(StringRef text, CoarsenOptions &o) {
  SmallVector<StringRef, 4> parts;
  text.split(parts, ';', -1, false);
  for (StringRef p : parts) {
    auto [key, value] = p.split('=');
    unsigned n = 0;
    if (key == "kernel") {
      o.kernel = value.str();
    } else if (key == "factor") {
      if (value.getAsInteger(10, n) || n < 1 || n > 64) return "factor: 1..64";
      o.factor = n;
    } else if (key == "dim") {
      if (value.getAsInteger(10, n) || n > 2) return "dim: 0, 1 or 2";
      o.dim = n;
    } else if (key == "mode") {
      if (value != "consecutive" && value != "strided") return "mode: consecutive or strided";
      o.strided = value == "strided";
    } else {
      return ("unknown option '" + key + "'").str();
    }
  }
  if (o.kernel.empty()) return "kernel=NAME is required";
  return "";
}

}  // namespace

namespace mirecc {

void registerCoarsenPasses(PassBuilder &pb) {
  pb.registerPipelineParsingCallback(
      [](StringRef name, ModulePassManager &mpm, ArrayRef<PassBuilder::PipelineElement>) {
        if (!name.consume_front("mirecc-coarsen")) return false;
        CoarsenOptions o;
        std::string error = "expected mirecc-coarsen<kernel=NAME;factor=K;dim=D;mode=...>";
        if (name.consume_front("<") && name.consume_back(">")) error = parseOptions(name, o);
        if (!error.empty()) {
          errs() << "mirecc-coarsen: " << error << "\n";
          return false;
        }
        mpm.addPass(CoarsenPass(o));
        return true;
      });
}

}  // namespace mirecc
