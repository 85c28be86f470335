"""Instruction-count features of a TU for the code-size ranking: how many
of each opcode, and the module's shape (functions, blocks, loops, calls),
read from the program graph the driver already builds.

Counts enter as log(1 + n) and opcodes also as shares of all instructions,
so that a forest can split on a module's size and on its mix alike.  The
same function makes the features offline (training) and in the driver.
"""
from __future__ import annotations

import numpy as np

from mirecc.graph import schema

# LLVM's instruction opcodes (as ProGraML names instruction nodes)
OPCODES = (
    "ret", "br", "switch", "indirectbr", "invoke", "resume", "unreachable", "fneg",
    "add", "fadd", "sub", "fsub", "mul", "fmul", "udiv", "sdiv", "fdiv", "urem", "srem",
    "frem", "shl", "lshr", "ashr", "and", "or", "xor", "extractelement", "insertelement",
    "shufflevector", "extractvalue", "insertvalue", "alloca", "load", "store", "fence",
    "cmpxchg", "atomicrmw", "getelementptr", "trunc", "zext", "sext", "fptrunc", "fpext",
    "fptoui", "fptosi", "uitofp", "sitofp", "ptrtoint", "inttoptr", "bitcast",
    "addrspacecast", "icmp", "fcmp", "phi", "select", "call", "va_arg", "landingpad",
    "freeze")
SHAPE = ("instructions", "functions", "blocks", "loops", "max_loop_depth", "variables",
         "constants", "call_edges", "data_edges")
NAMES = ([f"log_{s}" for s in SHAPE] + [f"log_{op}" for op in OPCODES]
         + [f"share_{op}" for op in OPCODES])


def graph_counts(graph) -> np.ndarray:
    """The feature vector (float32, ``len(NAMES)``) of a program graph."""
    types = graph.node_type
    is_instruction = types == schema.INSTRUCTION
    strings = graph.strings()
    index = {name: i for i, name in enumerate(strings)}
    per_text = np.bincount(graph.arrays["node_text"][is_instruction],
                           minlength=len(strings))
    ops = np.array([per_text[index[op]] if op in index else 0 for op in OPCODES],
                   np.float64)
    blocks = graph.node_block[is_instruction]
    functions = graph.node_function[is_instruction]
    flows = graph.arrays["edge_flow"]
    depth = graph.arrays["loop_depth"]
    total = float(is_instruction.sum())
    shape = np.array([
        total,
        len(np.unique(functions)),
        len(np.unique(np.stack([functions, blocks], 1), axis=0)) if total else 0,
        len(depth),
        depth.max() if len(depth) else 0,
        (types == schema.VARIABLE).sum(),
        (types == schema.CONSTANT).sum(),
        (flows == schema.CALL).sum(),
        (flows == schema.DATA).sum(),
    ], np.float64)
    shares = ops / total if total else np.zeros_like(ops)
    return np.concatenate([np.log1p(shape), np.log1p(ops), shares]).astype(np.float32)
