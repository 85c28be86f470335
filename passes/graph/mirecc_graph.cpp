// mirecc-graph: build a ProGraML-schema program graph from an LLVM module.
//
//   mirecc-graph [--stats] -o OUT.mgraph INPUT.{ll,bc}
//
// The graph follows the schema of ProGraML's llvm2graph (programl 0.3.2):
//   - node 0 is the "[external]" root (an instruction node, no function);
//   - one instruction node per instruction (text: opcode name, full text: the
//     instruction as printed by LLVM), one "; undefined function" node per
//     declared function;
//   - a variable node per use of an instruction result (text: its type) and
//     one per used function argument; one constant node per distinct constant
//     operand of the module (functions used as operands are not data);
//   - control edges between consecutive instructions of a block (position
//     0) and from a block's last instruction to each successor's first
//     (position = successor number; blocks reachable from the entry);
//   - data edges producer -> variable (position 0) and variable/constant ->
//     consumer (position = operand index);
//   - call edges call site -> callee entry and callee exits -> call site, and
//     the same between [external] and every function.
// On top of ProGraML: each node's function index and each instruction's
// innermost loop (LoopInfo); see FORMAT.md for the file layout.
//
// Exit status: 0 ok, 1 bad input (missing file, parse error, empty module,
// non-UTF-8 text), 2 usage error, 3 output error.
//
// Built twice from this file: the tool, and (MIRECC_GRAPH_LIBRARY) a shared
// library exporting mirecc_graph_build() for in-process use.

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/IR/CFG.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/AssemblyAnnotationWriter.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Metadata.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/ModuleSlotTracker.h"
#include "llvm/IRReader/IRReader.h"
#include "llvm/Support/ErrorOr.h"
#include "llvm/Support/FormattedStream.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#ifndef MIRECC_GRAPH_VERSION
#define MIRECC_GRAPH_VERSION "0.1"
#endif

namespace {

enum NodeType : uint8_t { kInstruction = 0, kVariable = 1, kConstant = 2 };
enum Flow : uint8_t { kControl = 0, kData = 1, kCall = 2 };

struct Graph {
  // Nodes.
  std::vector<uint8_t> nodeType;
  std::vector<int32_t> nodeFunction;
  std::vector<int32_t> nodeBlock;
  std::vector<int32_t> nodeLoop;
  std::vector<int32_t> nodeText;  // index into the string table
  std::vector<int64_t> fullOffsets{0};
  std::string fullBytes;
  // Where each node's full text comes from, filled in once the module is
  // printed (see Builder::finishText).
  enum FullKind : uint8_t { kText, kStatement, kResult, kGlobalLine };
  struct FullSource {
    FullKind kind;
    const void *value;  // the instruction / global, or nullptr
    int32_t text;       // index into Builder::texts_ for kText, -1 = empty
  };
  std::vector<FullSource> fullSources;
  // Edges.
  std::vector<uint8_t> edgeFlow;
  std::vector<int32_t> edgeSource, edgeTarget, edgePosition;
  // String table (node text: opcode names and type names).
  std::unordered_map<std::string, int32_t> stringIndex;
  std::vector<int64_t> stringOffsets{0};
  std::string stringBytes;
  // Functions.
  std::vector<int64_t> fnNameOffsets{0};
  std::string fnNameBytes;
  std::vector<uint8_t> fnIsDeclaration;
  std::vector<int32_t> fnEntry;
  // Loops.
  std::vector<int32_t> loopFunction, loopHeader, loopDepth, loopParent;

  int32_t intern(const std::string &s) {
    auto it = stringIndex.find(s);
    if (it != stringIndex.end()) return it->second;
    int32_t id = (int32_t)stringIndex.size();
    stringIndex.emplace(s, id);
    stringBytes += s;
    stringOffsets.push_back((int64_t)stringBytes.size());
    return id;
  }

  int32_t addNode(NodeType type, int32_t textId, FullSource full,
                  int32_t function, int32_t block, int32_t loop) {
    nodeType.push_back(type);
    nodeText.push_back(textId);
    nodeFunction.push_back(function);
    nodeBlock.push_back(block);
    nodeLoop.push_back(loop);
    fullSources.push_back(full);
    return (int32_t)nodeType.size() - 1;
  }

  void addEdge(Flow flow, int32_t source, int32_t target, int32_t position) {
    edgeFlow.push_back(flow);
    edgeSource.push_back(source);
    edgeTarget.push_back(target);
    edgePosition.push_back(position);
  }
};

struct FunctionEnds {
  int32_t entry = -1;
  std::vector<int32_t> exits;
};

llvm::StringRef trimLeft(llvm::StringRef s) { return s.ltrim(" \t\n"); }

// Records where each instruction and global variable lands in the printed
// module, so that the module is printed once (printing values one by one
// re-scans the module for every value).
// Instructions are printed in module order (functions, blocks,
// instructions), the order in which the builder numbers them, so their spans
// are kept in vectors indexed by that ordinal.
struct SpanRecorder : llvm::AssemblyAnnotationWriter {
  std::vector<uint64_t> instStart, instEnd;
  llvm::DenseMap<const llvm::Value *, uint64_t> globalEnd;
  void emitInstructionAnnot(const llvm::Instruction *,
                            llvm::formatted_raw_ostream &os) override {
    instStart.push_back(os.tell());
  }
  void printInfoComment(const llvm::Value &v,
                        llvm::formatted_raw_ostream &os) override {
    if (llvm::isa<llvm::Instruction>(v))
      instEnd.push_back(os.tell());
    else if (llvm::isa<llvm::GlobalVariable>(v))
      globalEnd[&v] = os.tell();
  }
};

class Builder {
 public:
  explicit Builder(const llvm::Module &m) : module_(m), slots_(&m) {}
  double printMs = 0;

  // Prints the module once (in a second thread, while the graph's structure
  // is built), then fills in the nodes' full text from the printed module.
  void run() {
    std::thread printer([this] {
      auto t0 = std::chrono::steady_clock::now();
      llvm::raw_string_ostream os(text_);
      module_.print(os, &spans_);
      os.flush();
      printMs = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - t0).count();
    });
    auto t0 = std::chrono::steady_clock::now();
    build();
    auto t1 = std::chrono::steady_clock::now();
    printer.join();
    auto t2 = std::chrono::steady_clock::now();
    finishText();
    auto t3 = std::chrono::steady_clock::now();
    auto ms = [](auto a, auto b) {
      return std::chrono::duration<double, std::milli>(b - a).count();
    };
    walkMs = ms(t0, t1);
    waitMs = ms(t1, t2);
    textMs = ms(t2, t3);
  }
  double walkMs = 0, waitMs = 0, textMs = 0;

  Graph &graph() { return g_; }

  static Graph::FullSource empty() { return {Graph::kText, nullptr, -1}; }
  Graph::FullSource immediate(std::string s) {
    texts_.push_back(std::move(s));
    return {Graph::kText, nullptr, (int32_t)texts_.size() - 1};
  }

  void finishText() {
    std::string &out = g_.fullBytes;
    g_.fullOffsets.reserve(g_.fullSources.size() + 1);
    for (size_t n = 0; n < g_.fullSources.size(); ++n) {
      const Graph::FullSource &src = g_.fullSources[n];
      switch (src.kind) {
        case Graph::kText:
          if (src.text >= 0) out += texts_[src.text];
          break;
        case Graph::kStatement:
          out += statement(src.text);
          break;
        case Graph::kResult: {
          // "<type> <name>" of an instruction result, e.g. "i32 %5".
          int32_t t = g_.nodeText[n];
          out.append(g_.stringBytes, g_.stringOffsets[t],
                     g_.stringOffsets[t + 1] - g_.stringOffsets[t]);
          out += ' ';
          llvm::StringRef text =
              statement(ordinal_.lookup((const llvm::Instruction *)src.value));
          size_t eq = text.find(" = ");
          out += (eq == llvm::StringRef::npos ? text : text.take_front(eq)).str();
          break;
        }
        case Graph::kGlobalLine: {
          // A global's definition line, as printed in the module.
          uint64_t e = spans_.globalEnd.lookup((const llvm::Value *)src.value);
          llvm::StringRef all(text_);
          size_t b = all.take_front(e).rfind('\n');
          out += all.slice(b == llvm::StringRef::npos ? 0 : b + 1, e).str();
          break;
        }
      }
      g_.fullOffsets.push_back((int64_t)out.size());
    }
    g_.fullSources.clear();
    g_.fullSources.shrink_to_fit();
  }

  void build() {
    g_.addNode(kInstruction, g_.intern("[external]"), empty(), -1, 0, -1);
    std::vector<FunctionEnds> ends;
    int32_t fnIndex = 0;
    for (const llvm::Function &f : module_) {
      llvm::StringRef name = f.getName();
      g_.fnNameBytes.append(name.data(), name.size());
      g_.fnNameOffsets.push_back((int64_t)g_.fnNameBytes.size());
      g_.fnIsDeclaration.push_back(f.isDeclaration() ? 1 : 0);
      ends.push_back(visitFunction(f, fnIndex));
      g_.fnEntry.push_back(ends.back().entry);
      functionIndex_[&f] = fnIndex;
      ++fnIndex;
    }
    // [external] <-> every function.
    for (const FunctionEnds &e : ends) addCallSite(0, e);
    // Call sites <-> callees, in program order.
    for (const auto &cs : callSites_) {
      auto it = functionIndex_.find(cs.second);
      if (it == functionIndex_.end()) continue;  // cannot happen in a module
      addCallSite(cs.first, ends[it->second]);
    }
    // One node per distinct constant operand, in order of first use.
    for (const auto &c : constantOrder_) {
      const auto &uses = constantUses_[c];
      Graph::FullSource full = llvm::isa<llvm::GlobalVariable>(c)
                                   ? Graph::FullSource{Graph::kGlobalLine, c, -1}
                                   : immediate(printValue(c));
      int32_t node = g_.addNode(kConstant, g_.intern(typeText(c->getType())),
                                full, -1, blockCount_, -1);
      for (const auto &u : uses) g_.addEdge(kData, node, u.first, u.second);
    }
  }

 private:
  // ProGraML's type text: struct types (and pointers to them) are "struct",
  // "struct*", ...; everything else as LLVM prints it.
  std::string typeText(llvm::Type *t) {
    auto it = typeCache_.find(t);
    if (it != typeCache_.end()) return it->second;
    std::string s;
    llvm::Type *base = t;
    int depth = 0;
#if LLVM_VERSION_MAJOR < 15
    while (base->isPointerTy() &&
           !llvm::cast<llvm::PointerType>(base)->isOpaque()) {
      base = base->getPointerElementType();
      ++depth;
    }
#endif
    if (base->isStructTy()) {
      s = "struct";
      s.append(depth, '*');
    } else {
      llvm::raw_string_ostream os(s);
      t->print(os);
      os.flush();
    }
    typeCache_.emplace(t, s);
    return s;
  }

  std::string printValue(const llvm::Value *v) {
    std::string s;
    llvm::raw_string_ostream os(s);
    v->print(os, slots_);
    os.flush();
    return trimLeft(s).str();
  }

  void addCallSite(int32_t site, const FunctionEnds &callee) {
    g_.addEdge(kCall, site, callee.entry, 0);
    for (int32_t exit : callee.exits) g_.addEdge(kCall, exit, site, 0);
  }

  FunctionEnds visitFunction(const llvm::Function &f, int32_t fn) {
    FunctionEnds ends;
    if (f.isDeclaration()) {
      int32_t node = g_.addNode(kInstruction, g_.intern("; undefined function"),
                                empty(), fn, 0, -1);
      ends.entry = node;
      ends.exits.push_back(node);
      return ends;
    }
    slots_.incorporateFunction(f);  // for printing arguments and constants

    // Loops: one id per loop, numbered in the order of their header blocks.
    llvm::DominatorTree dt(const_cast<llvm::Function &>(f));
    llvm::LoopInfo li(dt);
    llvm::DenseMap<const llvm::BasicBlock *, int32_t> blockIndex;
    int32_t bi = 0;
    for (const llvm::BasicBlock &bb : f) blockIndex[&bb] = bi++;
    llvm::DenseMap<const llvm::Loop *, int32_t> loopIds;
    for (const llvm::BasicBlock &bb : f) {
      const llvm::Loop *l = li.getLoopFor(&bb);
      if (!l || l->getHeader() != &bb) continue;
      int32_t id = (int32_t)g_.loopFunction.size();
      loopIds[l] = id;
      g_.loopFunction.push_back(fn);
      g_.loopHeader.push_back(blockIndex[&bb]);
      g_.loopDepth.push_back((int32_t)l->getLoopDepth());
      g_.loopParent.push_back(-1);
    }
    for (const auto &kv : loopIds) {
      const llvm::Loop *parent = kv.first->getParentLoop();
      if (parent) g_.loopParent[kv.second] = loopIds.lookup(parent);
    }

    llvm::DenseMap<const llvm::Instruction *, int32_t> instNodes;
    std::vector<std::pair<const llvm::Instruction *, int32_t>> producerEdges;
    // Arguments in order of first use, with their consumers.
    std::vector<const llvm::Argument *> argOrder;
    llvm::DenseMap<const llvm::Argument *, std::vector<std::pair<int32_t, int32_t>>>
        argUses;
    llvm::DenseMap<const llvm::BasicBlock *, std::pair<int32_t, int32_t>> blockEnds;

    for (const llvm::BasicBlock &bb : f) {
      const llvm::Loop *loop = li.getLoopFor(&bb);
      int32_t loopId = loop ? loopIds.lookup(loop) : -1;
      int32_t first = -1, last = -1;
      for (const llvm::Instruction &inst : bb) {
        int32_t node = g_.addNode(kInstruction, g_.intern(inst.getOpcodeName()),
                                  {Graph::kStatement, &inst, ordinal}, fn,
                                  blockCount_, loopId);
        ordinal_[&inst] = ordinal++;
        instNodes[&inst] = node;
        if (last >= 0) g_.addEdge(kControl, last, node, 0);
        if (auto *call = llvm::dyn_cast<llvm::CallInst>(&inst)) {
          if (const llvm::Function *callee = call->getCalledFunction())
            callSites_.push_back({node, callee});
        }
        int32_t position = 0;
        for (const llvm::Use &use : inst.operands()) {
          const llvm::Value *v = use.get();
          if (llvm::isa<llvm::Function>(v)) {
            // Not data: call edges carry this.
          } else if (auto *c = llvm::dyn_cast<llvm::Constant>(v)) {
            auto &uses = constantUses_[c];
            if (uses.empty()) constantOrder_.push_back(c);
            uses.push_back({node, position});
          } else if (auto *op = llvm::dyn_cast<llvm::Instruction>(v)) {
            int32_t var = g_.addNode(kVariable, g_.intern(typeText(op->getType())),
                                     {Graph::kResult, op, -1}, fn, blockCount_, -1);
            g_.addEdge(kData, var, node, position);
            producerEdges.push_back({op, var});
          } else if (auto *arg = llvm::dyn_cast<llvm::Argument>(v)) {
            auto &uses = argUses[arg];
            if (uses.empty()) argOrder.push_back(arg);
            uses.push_back({node, position});
          }
          // Basic blocks, inline asm and metadata are not data.
          ++position;
        }
        if (first < 0) first = node;
        last = node;
      }
      blockEnds[&bb] = {first, last};
      ++blockCount_;
    }

    for (const llvm::Argument *arg : argOrder) {
      std::string full = llvmTypeText(arg->getType()) + " ";
      {
        llvm::raw_string_ostream os(full);
        arg->printAsOperand(os, /*PrintType=*/false, slots_);
      }
      int32_t var = g_.addNode(kVariable, g_.intern(typeText(arg->getType())),
                               immediate(std::move(full)), fn, blockCount_, -1);
      for (const auto &u : argUses[arg]) g_.addEdge(kData, var, u.first, u.second);
    }
    for (const auto &pe : producerEdges) {
      auto it = instNodes.find(pe.first);
      if (it != instNodes.end()) g_.addEdge(kData, it->second, pe.second, 0);
    }

    // Control flow between blocks, breadth-first from the entry block (as
    // ProGraML: unreachable blocks get no outgoing control edges).
    const llvm::BasicBlock *entry = &f.getEntryBlock();
    ends.entry = blockEnds[entry].first;
    llvm::DenseMap<const llvm::BasicBlock *, bool> seen;
    std::deque<const llvm::BasicBlock *> queue{entry};
    seen[entry] = true;
    while (!queue.empty()) {
      const llvm::BasicBlock *bb = queue.front();
      queue.pop_front();
      int32_t exit = blockEnds[bb].second;
      int successors = 0;
      for (const llvm::BasicBlock *succ : llvm::successors(bb)) {
        g_.addEdge(kControl, exit, blockEnds[succ].first, successors);
        if (!seen.count(succ)) {
          seen[succ] = true;
          queue.push_back(succ);
        }
        ++successors;
      }
      if (!successors) ends.exits.push_back(exit);
    }
    return ends;
  }

  // The instruction as printed in the module, without indentation.
  llvm::StringRef statement(int32_t ordinal) {
    if (ordinal < 0 || (size_t)ordinal >= spans_.instStart.size() ||
        (size_t)ordinal >= spans_.instEnd.size())
      return "";
    uint64_t b = spans_.instStart[ordinal], e = spans_.instEnd[ordinal];
    return trimLeft(llvm::StringRef(text_).slice(b, e)).rtrim(" \n");
  }


  std::string llvmTypeText(llvm::Type *t) {
    auto it = llvmTypeCache_.find(t);
    if (it != llvmTypeCache_.end()) return it->second;
    std::string s;
    llvm::raw_string_ostream os(s);
    t->print(os);
    os.flush();
    llvmTypeCache_.emplace(t, s);
    return s;
  }

  const llvm::Module &module_;
  llvm::ModuleSlotTracker slots_;
  Graph g_;
  int32_t blockCount_ = 0;
  std::unordered_map<const llvm::Function *, int32_t> functionIndex_;
  std::vector<std::pair<int32_t, const llvm::Function *>> callSites_;
  std::vector<const llvm::Constant *> constantOrder_;
  std::unordered_map<const llvm::Constant *, std::vector<std::pair<int32_t, int32_t>>>
      constantUses_;
  std::unordered_map<llvm::Type *, std::string> typeCache_;
  std::unordered_map<llvm::Type *, std::string> llvmTypeCache_;
  std::string text_;  // the printed module
  SpanRecorder spans_;
  std::vector<std::string> texts_;
  llvm::DenseMap<const llvm::Instruction *, int32_t> ordinal_;
  int32_t ordinal = 0;
};

// ---------------------------------------------------------------- output ---

std::string jsonString(llvm::StringRef s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      out += '\\';
      out += (char)c;
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", c < 0x80 ? c : 0xfffd);
      out += buf;
    } else {
      out += (char)c;
    }
  }
  return out + "\"";
}

struct ArrayOut {
  std::string name, dtype;
  const void *data;
  size_t count, itemsize;
};

template <typename T>
ArrayOut arr(const char *name, const char *dtype, const std::vector<T> &v) {
  return {name, dtype, v.data(), v.size(), sizeof(T)};
}
ArrayOut arr(const char *name, const std::string &bytes) {
  return {name, "|u1", bytes.data(), bytes.size(), 1};
}

bool writeGraph(const std::string &path, const Graph &g, const llvm::Module &m,
                const std::string &input) {
  std::vector<ArrayOut> arrays = {
      arr("node_type", "|u1", g.nodeType),
      arr("node_text", "<i4", g.nodeText),
      arr("node_function", "<i4", g.nodeFunction),
      arr("node_block", "<i4", g.nodeBlock),
      arr("node_loop", "<i4", g.nodeLoop),
      arr("node_full_text_offsets", "<i8", g.fullOffsets),
      arr("node_full_text_bytes", g.fullBytes),
      arr("edge_flow", "|u1", g.edgeFlow),
      arr("edge_source", "<i4", g.edgeSource),
      arr("edge_target", "<i4", g.edgeTarget),
      arr("edge_position", "<i4", g.edgePosition),
      arr("string_offsets", "<i8", g.stringOffsets),
      arr("string_bytes", g.stringBytes),
      arr("function_name_offsets", "<i8", g.fnNameOffsets),
      arr("function_name_bytes", g.fnNameBytes),
      arr("function_is_declaration", "|u1", g.fnIsDeclaration),
      arr("function_entry", "<i4", g.fnEntry),
      arr("loop_function", "<i4", g.loopFunction),
      arr("loop_header", "<i4", g.loopHeader),
      arr("loop_depth", "<i4", g.loopDepth),
      arr("loop_parent", "<i4", g.loopParent),
  };
  // Header size depends on the offsets it lists: lay out twice.
  auto makeHeader = [&](uint64_t base) {
    std::string h = "{\"format\":\"mirecc-graph\",\"version\":1";
    h += ",\"producer\":\"mirecc-graph " MIRECC_GRAPH_VERSION " (LLVM " +
         std::to_string(LLVM_VERSION_MAJOR) + "." +
         std::to_string(LLVM_VERSION_MINOR) + ")\"";
    h += ",\"llvm_major\":" + std::to_string(LLVM_VERSION_MAJOR);
    h += ",\"input\":" + jsonString(input);
    h += ",\"source_filename\":" + jsonString(m.getSourceFileName());
    h += ",\"target_triple\":" + jsonString(m.getTargetTriple());
    h += ",\"num_nodes\":" + std::to_string(g.nodeType.size());
    h += ",\"num_edges\":" + std::to_string(g.edgeFlow.size());
    h += ",\"arrays\":[";
    uint64_t off = base;
    for (size_t i = 0; i < arrays.size(); ++i) {
      const ArrayOut &a = arrays[i];
      if (i) h += ",";
      h += "{\"name\":\"" + a.name + "\",\"dtype\":\"" + a.dtype +
           "\",\"count\":" + std::to_string(a.count) +
           ",\"offset\":" + std::to_string(off) + "}";
      off += (a.count * a.itemsize + 7) & ~(uint64_t)7;
    }
    h += "]}";
    return h;
  };
  auto padded = [](std::string h) {
    // 8 magic + 4 version + 4 length + header, padded to 8 bytes.
    while ((16 + h.size()) % 8) h += ' ';
    return h;
  };
  std::string header = padded(makeHeader(0));
  for (int i = 0; i < 4; ++i) {  // offsets change the length; converge
    std::string next = padded(makeHeader(16 + header.size()));
    if (next.size() == header.size()) {
      header = next;
      break;
    }
    header = next;
  }
  std::string tmp = path == "-" ? path : path + ".tmp";
  FILE *out = path == "-" ? stdout : fopen(tmp.c_str(), "wb");
  if (!out) return false;
  bool ok = true;
  ok &= fwrite("MIRGRAPH", 1, 8, out) == 8;
  uint32_t version = 1, hlen = (uint32_t)header.size();
  unsigned char le[8];
  for (int i = 0; i < 4; ++i) le[i] = (version >> (8 * i)) & 0xff;
  for (int i = 0; i < 4; ++i) le[4 + i] = (hlen >> (8 * i)) & 0xff;
  ok &= fwrite(le, 1, 8, out) == 8;
  ok &= fwrite(header.data(), 1, header.size(), out) == header.size();
  static const char zeros[8] = {0};
  for (const ArrayOut &a : arrays) {
    size_t n = a.count * a.itemsize;
    if (n) ok &= fwrite(a.data, 1, n, out) == n;
    size_t pad = ((n + 7) & ~(size_t)7) - n;
    if (pad) ok &= fwrite(zeros, 1, pad, out) == pad;
  }
  if (path == "-") return ok && fflush(out) == 0;
  ok &= fclose(out) == 0;
  if (ok) ok = rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) remove(tmp.c_str());
  return ok;
}

// ----------------------------------------------------------------- input ---

// Offset of the first byte that is not valid UTF-8, or -1.
long firstInvalidUtf8(llvm::StringRef s) {
  const unsigned char *p = (const unsigned char *)s.data();
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) { ++i; continue; }
    int len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (!len || (len == 2 && c < 0xc2) || (len == 4 && c > 0xf4) || i + len > n)
      return (long)i;
    for (int k = 1; k < len; ++k)
      if ((p[i + k] & 0xc0) != 0x80) return (long)i;
    ++i;
    i += len - 1;
  }
  return -1;
}

// An error about `input`: the message (as the tool prints it, less its
// "mirecc-graph: error: " prefix) goes to `message`; the exit status is 1.
int fail(std::string &message, const std::string &input, const std::string &what) {
  message = input + ": " + what;
  return 1;
}

int usage() {
  llvm::errs() << "usage: mirecc-graph [--stats] -o OUTPUT INPUT.{ll,bc}\n"
                  "Build a ProGraML-schema program graph (see passes/graph/FORMAT.md).\n";
  return 2;
}

}  // namespace

// Build the graph of the module in `input` into the file `output`.  Returns
// the tool's exit status; on an error `message` says what (file: problem).
// With `statsLine`, one JSON line of sizes and timings goes there.
static int buildGraphFile(const std::string &input, const std::string &output,
                          std::string *statsLine, std::string &message) {
  auto t0 = std::chrono::steady_clock::now();

  auto buf = llvm::MemoryBuffer::getFileOrSTDIN(input, /*IsText=*/false);
  if (!buf) return fail(message, input, "cannot read file: " + buf.getError().message());
  llvm::StringRef bytes = (*buf)->getBuffer();
  bool bitcode = bytes.size() >= 4 && (memcmp(bytes.data(), "BC\xC0\xDE", 4) == 0 ||
                                       memcmp(bytes.data(), "\xDE\xC0\x17\x0B", 4) == 0);
  if (!bitcode) {
    if (bytes.find_first_not_of(" \t\r\n") == llvm::StringRef::npos)
      return fail(message, input, "empty module (the file holds no IR)");
    long bad = firstInvalidUtf8(bytes);
    if (bad >= 0) {
      size_t line = 1 + bytes.take_front(bad).count('\n');
      return fail(message, input, "not valid UTF-8 text (byte offset " + std::to_string(bad) +
                             ", line " + std::to_string(line) +
                             "); expected LLVM IR text or bitcode");
    }
  }
  llvm::LLVMContext ctx;
  llvm::SMDiagnostic diag;
  std::unique_ptr<llvm::Module> module =
      llvm::parseIR((*buf)->getMemBufferRef(), diag, ctx);
  if (!module) {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    if (diag.getLineNo() > 0) os << "line " << diag.getLineNo() << ":" << (diag.getColumnNo() + 1) << ": ";
    os << "invalid LLVM IR: " << diag.getMessage();
    os.flush();
    return fail(message, input, msg);
  }
  bool anyDefinition = false;
  for (const llvm::Function &f : *module) anyDefinition |= !f.isDeclaration();
  if (!anyDefinition) return fail(message, input, "empty module (no function definitions)");
  auto t1 = std::chrono::steady_clock::now();

  Builder builder(*module);
  builder.run();
  auto t2 = std::chrono::steady_clock::now();
  if (!writeGraph(output, builder.graph(), *module, input)) {
    message = output + ": cannot write the graph";
    return 3;
  }
  auto t3 = std::chrono::steady_clock::now();
  if (statsLine) {
    auto ms = [](auto a, auto b) {
      return std::chrono::duration<double, std::milli>(b - a).count();
    };
    const Graph &g = builder.graph();
    char line[256];
    snprintf(line, sizeof line,
             "{\"nodes\":%zu,\"edges\":%zu,\"parse_ms\":%.1f,\"print_ms\":%.1f,"
             "\"walk_ms\":%.1f,\"wait_ms\":%.1f,\"text_ms\":%.1f,\"build_ms\":%.1f,"
             "\"write_ms\":%.1f}\n",
             g.nodeType.size(), g.edgeFlow.size(), ms(t0, t1), builder.printMs, builder.walkMs,
             builder.waitMs, builder.textMs, ms(t1, t2),
             ms(t2, t3));
    *statsLine = line;
  }
  return 0;
}

// The shared library's entry point (libmirecc-graph-<LLVM major>.so, which
// mirecc's per-user server loads once: no process start, no libLLVM load per
// TU).  Same statuses as the tool; the error message (file: problem) goes to
// `message`, cut to `messageSize`.
extern "C" __attribute__((visibility("default"))) int
mirecc_graph_build(const char *input, const char *output, char *message, size_t messageSize) {
  std::string text;
  int status;
  try {
    status = buildGraphFile(input, output, nullptr, text);
  } catch (const std::exception &e) {   // e.g. bad_alloc: an error, not a dead server
    text = std::string(input) + ": " + e.what();
    status = 1;
  }
  if (messageSize) snprintf(message, messageSize, "%s", text.c_str());
  return status;
}

extern "C" __attribute__((visibility("default"))) const char *mirecc_graph_version() {
  return MIRECC_GRAPH_VERSION " (LLVM " LLVM_VERSION_STRING ")";
}

#ifndef MIRECC_GRAPH_LIBRARY
int main(int argc, char **argv) {
  std::string input, output;
  bool stats = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-o" && i + 1 < argc) output = argv[++i];
    else if (a == "--stats") stats = true;
    else if (a == "--version") {
      llvm::outs() << "mirecc-graph " MIRECC_GRAPH_VERSION " (LLVM " << LLVM_VERSION_STRING << ")\n";
      return 0;
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (!a.empty() && a[0] == '-' && a != "-") return usage();
    else if (input.empty()) input = a;
    else return usage();
  }
  if (input.empty() || output.empty()) return usage();
  std::string message, statsLine;
  int status = buildGraphFile(input, output, stats ? &statsLine : nullptr, message);
  if (status != 0) llvm::errs() << "mirecc-graph: error: " << message << "\n";
  llvm::errs() << statsLine;
  return status;
}
#endif  // MIRECC_GRAPH_LIBRARY
