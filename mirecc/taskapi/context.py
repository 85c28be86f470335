"""One translation unit's context, built once and shared by every head and
by ``--explain``: one graph of the front end's bitcode, one loop table (one
loop-id format, the graph builder's ``<function>:<header block index>``),
one summary of what was seen, one embedding, one table of call sites and
LLVM's view of them.

Each part is computed on first use, so a head that needs no embedding costs
no encoder run, and a TU whose heads need only the loop table costs one
graph build.  In the per-user server the encoder and its sessions stay
loaded between TUs (:data:`_ENCODERS`).

The one exception to "one read of the IR": the encoder was pretrained on the
IR of the clang that matches the native graph builder (clang-14 here).  When
the build's compiler is another clang, the embedding is made from the TU
emitted again by that clang, with the user's flags (the head is told so in
its reason).  The default compiler is that clang, so this is rare.
"""
from __future__ import annotations

import os
from pathlib import Path

from mirecc.taskapi.api import HeadError, NoDecision
from mirecc.taskapi.config import load_config
from mirecc.taskapi.records import TURequest
from mirecc.util.caches import process_cache

# model directory -> (ModelInfo, Encoder or None): verified once per process
_ENCODERS = process_cache("encoders")


def head_error(message: str) -> HeadError:
    return HeadError(" ".join(message.split()))


class TUEmbedding:
    """Module, function and loop embeddings (numpy float32 vectors); loop ids
    are the graph builder's ids of the IR the encoder saw."""

    def __init__(self, module, functions: dict, loops: dict):
        import numpy as np  # lazy: numpy (~150 ms), only a head that embeds

        def vec(v):
            return np.asarray(v, dtype=np.float32).reshape(-1)
        self.module = vec(module)
        self.functions = {k: vec(v) for k, v in functions.items()}
        self.loops = {k: vec(v) for k, v in loops.items()}


def encoder_model(config):
    """The encoder the heads' embeddings come from: ``model`` of the
    configuration, else the shipped one; verified against its manifest once
    per process."""
    # lazy: the model's manifest (hashlib, json), only a head that embeds
    from mirecc.encoder import SHIPPED_MODEL_DIR
    from mirecc.util.modelfiles import ModelError, load_model

    directory = str(Path(config.model).resolve()) if config is not None and config.model \
        else str(SHIPPED_MODEL_DIR)
    if directory not in _ENCODERS:
        try:
            _ENCODERS[directory] = [load_model(directory), None]
        except ModelError as exc:
            raise head_error(f"encoder model: {exc}") from None
    return _ENCODERS[directory][0]


def loaded_encoder(directory: str):
    """The encoder of a model directory with its ONNX sessions, loaded once
    per process (the server's pipeline and embedding requests share it)."""
    # lazy: ONNX Runtime and the tokenizer; tests replace runtime.Encoder
    from mirecc.encoder.runtime import Encoder
    from mirecc.util.modelfiles import load_model

    entry = _ENCODERS.get(directory)
    if entry is None:
        entry = _ENCODERS[directory] = [load_model(directory), None]
    if entry[1] is None:
        entry[1] = Encoder(directory)
    return entry[1]


def _encoder(config):
    from mirecc.util.modelfiles import ModelError  # lazy: as in encoder_model

    info = encoder_model(config)
    try:
        return loaded_encoder(str(info.directory))
    except ModelError as exc:
        raise head_error(f"encoder model: {exc}") from None


class TUContext:
    """What the heads of one TU share.  ``request``: the
    :class:`mirecc.taskapi.records.TURequest`; ``want_summary``: ``--explain``
    asked for what was seen; ``where``: "server" or "in process", for
    reasons."""

    def __init__(self, request, config, want_summary: bool = False, where: str = "in process"):
        self.request = request
        self.config = config
        self.want_summary = want_summary
        self.where = where
        self._graph = None
        self._loops = None
        self._summary = None
        self._embedding = None
        self._ir_text = None
        self._regions = None
        self._calls = None
        self._call_costs = None
        self.notes: dict = {}   # a head's own per-TU data, between rank and decide

    # -------------------------------------------------------------- graph

    @property
    def graph(self):
        """The graph builder's graph of the TU's bitcode (built once).  A
        module without function definitions (a TU of data alone, e.g. a
        table) raises NoDecision: nothing to decide, nothing to warn about."""
        if self._graph is None:
            # lazy: the graph builder and numpy (~150 ms), only a head that reads the graph
            from mirecc.graph import GraphBuildError, build_graph_any

            try:
                # in the server, the builder's library (no process per TU);
                # the driver runs the tool: LLVM failing must not take a build down
                self._graph = build_graph_any(self.request.bitcode_path,
                                              in_process=self.where == "server")
            except GraphBuildError as exc:
                if "no function definitions" in str(exc):
                    raise NoDecision("no function definitions (a TU of data alone)",
                                     code="no-functions") from None
                raise head_error(f"cannot read the IR of {self.request.source}: "
                                 f"{exc}") from None
        return self._graph

    @property
    def loops(self) -> list:
        """Every loop of the TU (:class:`mirecc.graph.irinfo.Loop`), in graph order."""
        if self._loops is None:
            from mirecc.graph.irinfo import graph_loops  # lazy: as the graph
            self._loops = graph_loops(self.graph)
        return self._loops

    @property
    def ir_text(self) -> str:
        """The TU's bitcode as IR text (disassembled once, for every head)."""
        if self._ir_text is None:
            from mirecc.ir.text import IRTextError, disassemble  # lazy: re, llvmlite

            try:
                with open(self.request.bitcode_path, "rb") as f:
                    self._ir_text = disassemble(f.read(), self.request.source)
            except (OSError, IRTextError) as exc:
                raise head_error(f"cannot read the IR of {self.request.source}: "
                                 f"{exc}") from None
        return self._ir_text

    @property
    def regions(self) -> tuple[list, dict]:
        """The TU's OpenMP sites (:func:`mirecc.ir.regions.find_sites`, ids
        ``<function>:<index>``) and each parallel region's statistics
        (:func:`mirecc.ir.region_stats.region_statistics`), found once."""
        if self._regions is None:
            # lazy: the OpenMP region readers (re, dataclasses), OpenMP heads only
            from mirecc.ir.region_stats import region_statistics
            from mirecc.ir.regions import find_sites

            sites = find_sites(self.ir_text)
            self._regions = (sites, region_statistics(self.ir_text, sites))
        return self._regions

    @property
    def calls(self) -> dict[str, tuple[str, str]]:
        """The TU's call sites of functions it names directly, by id
        (``<caller>:call<k>``, as the pass plugin numbers them:
        :func:`mirecc.ir.text.call_sites`) -> (caller, callee), found once."""
        if self._calls is None:
            from mirecc.ir.text import call_sites  # lazy: with the IR's text

            self._calls = {f"{caller}:call{k}": (caller, callee)
                           for caller, callees in call_sites(self.ir_text).items()
                           for k, callee in enumerate(callees)}
        return self._calls

    def call_costs(self, opt: str, plugin) -> dict[str, dict]:
        """LLVM's -Oz view of each call site whose callee the TU defines, by
        the ids of :attr:`calls` (:func:`mirecc.ir.calls.call_costs`: one
        ``opt`` run with the pass ``plugin``, the head's to find), read once."""
        if self._call_costs is None:
            import subprocess  # lazy: with the call sites' costs only
            from mirecc.ir.calls import call_costs  # lazy: as subprocess

            try:
                self._call_costs = call_costs(self.request.bitcode_path, opt, plugin)
            except (OSError, subprocess.SubprocessError, ValueError) as exc:
                raise head_error(f"cannot read LLVM's inline costs of {self.request.source}: "
                                 f"{type(exc).__name__}: {exc}") from None
        return self._call_costs

    @property
    def summary(self):
        """What ``--explain`` shows as seen (:class:`mirecc.graph.irinfo.ModuleInfo`)."""
        if self._summary is None:
            from mirecc.graph.irinfo import ModuleInfo, summary_from_graph  # lazy: as the graph
            try:
                self._summary = summary_from_graph(self.graph, self.request)
            except NoDecision:   # no function definitions
                self._summary = ModuleInfo(self.request.source, "", (), 0)
        return self._summary

    # ---------------------------------------------------------- embedding

    def embedding(self) -> tuple[TUEmbedding, str]:
        """The encoder's embeddings of the TU, and how they were made."""
        if self._embedding is None:
            from mirecc.encoder.runtime import EmbedError  # lazy: ONNX Runtime, embeddings only

            graph, note = self._encoder_graph()
            try:
                emb = _encoder(self.config).embed_graph(graph)
            except EmbedError as exc:
                raise head_error(f"embedding the IR of {self.request.source}: {exc}") from None
            self._embedding = (TUEmbedding(emb.module, emb.functions, emb.loops),
                               self.where + note)
        return self._embedding

    def function_embeddings(self, names=None) -> dict:
        """Each defined function's own vector (``names``: only those), from
        its part of the program graph alone
        (:meth:`mirecc.encoder.runtime.Encoder.embed_functions`), cached by the
        function's code digest (the profiles' :func:`mirecc.ir.text.function_digests`)
        when the encoder reads the TU's own IR: a rebuild, or a second decision
        on the same function, pays nothing."""
        # lazy: ONNX Runtime and the IR reader, function embeddings only
        from mirecc.encoder.runtime import EmbedError
        from mirecc.ir.text import function_digests

        graph, note = self._encoder_graph()
        digests = function_digests(self.ir_text) if not note else None
        try:
            return _encoder(self.config).embed_functions(graph, names, digests)
        except EmbedError as exc:
            raise head_error(f"embedding the functions of {self.request.source}: "
                             f"{exc}") from None

    def _encoder_graph(self):
        """The graph the encoder embeds: the TU's own, unless the build's
        clang is not the encoder's (then the TU is emitted again by it)."""
        # lazy: tempfile, ONNX Runtime and the graph builder, embeddings only
        import tempfile
        from mirecc.encoder.runtime import EmbedError, compile_to_ir, default_clang
        from mirecc.graph import GraphBuildError, build_graph_any

        request = self.request
        try:
            clang = default_clang()
        except EmbedError as exc:
            raise head_error(str(exc)) from None
        if not request.compiler or os.path.realpath(request.compiler) == os.path.realpath(clang):
            return self.graph, ""
        flags = [*request.flags, *(["-x", "cl"] if request.language == "cl" else [])]
        with tempfile.TemporaryDirectory(prefix="mirecc-encoder-") as tmp:
            out = Path(tmp) / "tu.bc"
            try:
                compile_to_ir(Path(request.source), out, clang, flags, cwd=request.cwd or None)
                graph = build_graph_any(out, in_process=self.where == "server")
            except (EmbedError, GraphBuildError) as exc:
                raise head_error(f"re-emitting the IR with {clang} for the encoder: "
                                 f"{exc}") from None
        return graph, f"; IR re-emitted with {Path(clang).name} (the encoder's clang)"


def device_context(source: str, cmd, bitcode, config=None):
    """The TU context of a CUDA source's device IR (``cmd``: its
    :class:`mirecc.frontend.nvcc.NvccCommand`; ``bitcode``: a Path): one
    read of its text, one graph, one embedding, as for a C TU (``compiler`` left empty: the IR is already the encoder's clang's)."""
    # lazy: hashlib (~10 ms): nvcc's driver imports this module, a CUDA TU's ML path calls this
    import hashlib

    data = bitcode.read_bytes()
    # nvcc optimises device code whatever the host's -O (ptxas -O3)
    request = TURequest(source=source, language="cuda", opt_level="3",
                        flags=tuple(cmd.preprocessor), bitcode_path=str(bitcode),
                        bitcode_sha256=hashlib.sha256(data).hexdigest())
    return TUContext(request, config if config is not None else load_config())
