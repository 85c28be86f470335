"""The frozen encoder's embeddings of one translation unit, for the heads in
the driver (OpenCL heads: the module; the loop-vectorize head: functions and
loops).

One TU's heads share one embedding: it is computed once per (bitcode,
encoder) in a process, through the per-user embedding server when one
answers (started if none does, unless ``embed_server: false``), else in
this process.  Only the standard library is imported at the top.
"""
from __future__ import annotations

from pathlib import Path

# (bitcode sha256, model directory) -> (TUEmbedding, how it was computed)
_EMBEDDINGS: dict = {}
# model directory -> ModelInfo (the manifest's hashes are checked once per process)
_MODELS: dict = {}


def _head_error(message: str):
    from mirecc.pipeline import HeadError
    return HeadError(" ".join(message.split()))


class TUEmbedding:
    """Module, function and loop embeddings (numpy float32 vectors); loop ids
    are the graph builder's ``<function>:<header block index>`` of the IR
    the encoder saw (see :func:`encoder_bitcode`)."""

    def __init__(self, module, functions: dict, loops: dict):
        import numpy as np

        def vec(v):
            return np.asarray(v, dtype=np.float32).reshape(-1)
        self.module = vec(module)
        self.functions = {k: vec(v) for k, v in functions.items()}
        self.loops = {k: vec(v) for k, v in loops.items()}


def encoder_model(config):
    """The encoder the heads' embeddings come from: ``model`` of the
    configuration, else the shipped one; verified against its manifest."""
    from mirecc.encoder import SHIPPED_MODEL_DIR
    from mirecc.model import ModelError, load_model

    directory = str(Path(config.model).resolve()) if config is not None and config.model \
        else str(SHIPPED_MODEL_DIR)
    if directory not in _MODELS:
        try:
            _MODELS[directory] = load_model(directory)
        except ModelError as exc:
            raise _head_error(f"encoder model: {exc}") from None
    return _MODELS[directory]


def tu_embedding(request, config) -> tuple[TUEmbedding, str]:
    """The embeddings of ``request``'s TU and how they were made."""
    info = encoder_model(config)
    directory = str(info.directory)
    key = (request.bitcode_sha256, directory)
    if key in _EMBEDDINGS:
        return _EMBEDDINGS[key]
    bitcode, how_ir = encoder_bitcode(request)
    result, how = None, None
    if config is None or config.embed_server:
        from mirecc.encoder import server

        reply = server.embed(bitcode, model_dir=directory)
        if reply.get("ok"):
            result = TUEmbedding(reply["module"], reply.get("functions", {}),
                                 reply.get("loops", {}))
            how = "embedding server"
        elif "error" in reply:
            raise _head_error(f"embedding the IR of {request.source}: {reply['error']}")
    if result is None:
        from mirecc.encoder.runtime import EmbedError, Encoder
        from mirecc.model import ModelError

        try:
            emb = Encoder(directory).embed_file(bitcode)
        except (EmbedError, ModelError) as exc:
            raise _head_error(f"embedding the IR of {request.source}: {exc}") from None
        result, how = TUEmbedding(emb.module, emb.functions, emb.loops), "in process"
    _EMBEDDINGS[key] = (result, how + how_ir)
    return _EMBEDDINGS[key]


def encoder_bitcode(request) -> tuple[str, str]:
    """The bitcode to embed and a note for the reason.  The heads were trained
    on IR from the clang that matches the graph builder (clang-14 here); when
    the build's compiler is another clang (its bitcode may not even load into
    the builder's LLVM), the TU is emitted again with that clang, same flags."""
    import os
    from mirecc.encoder.runtime import EmbedError, compile_to_ir, default_clang

    try:
        clang = default_clang()
    except EmbedError as exc:
        raise _head_error(str(exc)) from None
    if not request.compiler or os.path.realpath(request.compiler) == os.path.realpath(clang):
        return request.bitcode_path, ""
    out = Path(request.bitcode_path).with_suffix(".encoder.bc")
    flags = [*request.flags, *(["-x", "cl"] if request.language == "cl" else [])]
    try:
        compile_to_ir(Path(request.source), out, clang, flags)
    except EmbedError as exc:
        raise _head_error(f"re-emitting the IR with {clang} for the encoder: {exc}") from None
    return str(out), f"; IR re-emitted with {Path(clang).name} (the encoder's clang)"
