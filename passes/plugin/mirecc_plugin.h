// What the plugin's three parts share (mirecc_loophints.cpp reads the
// decisions file and hands each part its entries; mirecc_openmp.cpp and
// mirecc_record.cpp register their passes). One declaration, here.
#ifndef MIRECC_PLUGIN_H
#define MIRECC_PLUGIN_H

#include "llvm/ADT/StringRef.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/InstrTypes.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/JSON.h"

#include <string>

namespace mirecc {
// The function an instruction calls, through pointer casts (LLVM 14's typed
// pointers call through a bitcast where the declaration's type differs);
// null for anything else.
inline llvm::Function *calleeOf(const llvm::Instruction &i) {
  if (const auto *cb = llvm::dyn_cast<llvm::CallBase>(&i))
    return llvm::dyn_cast<llvm::Function>(cb->getCalledOperand()->stripPointerCasts());
  return nullptr;
}

// mirecc_loophints.cpp: the decisions file is read and valid
bool decisionsLoaded();

// mirecc_openmp.cpp: helpers defined in the module: a char* to a private
// copy of `text`; an internal nounwind function; the adaptive runtime's site
// descriptor type (runtime/adapt/mirecc_adapt.c, `struct site`); a call of
// the weak runtime entry `name` through a module-local helper that returns 0
// when the runtime is not linked in
llvm::Constant *cString(llvm::Module &m, llvm::StringRef text);
llvm::Function *newHelper(llvm::Module &m, llvm::StringRef name, llvm::FunctionType *type);
llvm::StructType *siteType(llvm::LLVMContext &ctx, llvm::Type *charPtr);
llvm::Function *weakCaller(llvm::Module &m, llvm::StringRef name, llvm::FunctionType *type);

// mirecc_openmp.cpp: a module entry's "openmp" decisions ("" or an error)
std::string parseOpenMPDecisions(llvm::StringRef module, const llvm::json::Object &openmp,
                                 const std::string &where);
void clearOpenMPDecisions();
void registerOpenMPPasses(llvm::PassBuilder &pb);

// mirecc_record.cpp: a module entry's "record" texts ("" or an error)
std::string parseRecords(llvm::StringRef module, const llvm::json::Object &record,
                         const std::string &where);
void clearRecords();
void registerRecordPasses(llvm::PassBuilder &pb);

// mirecc_inline.cpp: a module entry's "calls" decisions ("" or an error)
std::string parseCallDecisions(llvm::StringRef module, const llvm::json::Object &calls,
                               const std::string &where);
void clearCallDecisions();
void registerCallPasses(llvm::PassBuilder &pb);

// mirecc_coarsen.cpp: OpenCL thread coarsening, named for opt only
void registerCoarsenPasses(llvm::PassBuilder &pb);
}  // namespace mirecc

#endif  // MIRECC_PLUGIN_H
