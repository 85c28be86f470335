"""The ProGraML program-graph schema (programl 0.3.2, LLVM graphs).

Node types and edge flows use ProGraML's enum values, so graphs can be
compared with ``llvm2graph`` output directly.
"""

# Node.type
INSTRUCTION = 0
VARIABLE = 1
CONSTANT = 2

NODE_TYPES = {INSTRUCTION: "instruction", VARIABLE: "variable", CONSTANT: "constant"}

# Edge.flow
CONTROL = 0
DATA = 1
CALL = 2

EDGE_FLOWS = {CONTROL: "control", DATA: "data", CALL: "call"}

#: Node 0 of every graph: the root that calls every function.
EXTERNAL_TEXT = "[external]"
#: Text of the single instruction node standing for a declared function.
UNDEFINED_FUNCTION_TEXT = "; undefined function"

#: "No function" / "not in a loop" in the per-node index arrays.
NONE = -1
