"""``mire embed``: module, function and loop embeddings of IR or source files.

Imports only the standard library until it knows what it needs: with
``--server`` and JSON output the whole run is a socket round trip to
``mire serve`` (:mod:`mirecc.tu.server`), so a build pays for no
numpy, onnxruntime or model load per file.
"""
from __future__ import annotations

import io
import json
import shlex
import sys
from pathlib import Path

from mirecc.util.fsutil import atomic_write_bytes

GRANULARITIES = {"module": ("module",), "function": ("functions",), "loop": ("loops",),
                 "all": ("module", "functions", "loops")}


def add_arguments(p) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help=".ll, .bc or a C/C++/OpenCL/CUDA source")
    p.add_argument("--granularity", choices=sorted(GRANULARITIES), default="module")
    p.add_argument("-o", "--output", help="save to this file instead of printing: .json, or "
                   ".npz (arrays named module/<file>, function/<file>/<name>, loop/<file>/<id>)")
    p.add_argument("--model", help="model directory (default: the shipped encoder)")
    p.add_argument("--server", action="store_true",
                   help="ask the per-user embedding server (mire serve; started if none "
                        "runs) instead of loading the model in this process")
    p.add_argument("--no-cache", action="store_true", help="do not use the statement cache")
    p.add_argument("--cache", help="statement cache file (default: $MIRECC_CACHE_DIR, else "
                   "$XDG_CACHE_HOME/mirecc, else ~/.cache/mirecc: embeddings.sqlite)")
    p.add_argument("--clang", help="clang for source files (default: the one matching the "
                   "native graph builder, else the newest on PATH)")
    p.add_argument("--flags", default="", help="extra compile flags for source files, e.g. '-I inc -DN=4'")
    p.add_argument("--stats", action="store_true", help="print timing and cache figures to stderr")


def _embed_all(args) -> tuple[dict, int]:
    """file -> JSON-ready embeddings (``Embeddings.to_json`` form), exit status."""
    flags = shlex.split(args.flags)
    results, status, encoder = {}, 0, None
    for f in args.files:
        if args.server:
            from mirecc.tu import server  # lazy: only --server talks to the server
            reply = server.embed(f, args.model, args.clang, flags)
            if reply.get("ok"):
                reply.pop("ok")
                results[f] = reply
                continue
            if "error" in reply:
                print(f"mire embed: {reply['error']}", file=sys.stderr)
                status = 1
                continue
            print(f"mire embed: warning: {reply['unavailable']}; embedding in this process",
                  file=sys.stderr)
            args.server = False
        if encoder is None:
            # lazy: ONNX Runtime, numpy and the model, only when no server embeds
            from mirecc.encoder.runtime import Encoder
            from mirecc.util.modelfiles import ModelError
            try:
                encoder = Encoder(args.model, cache=False if args.no_cache else args.cache)
            except ModelError as exc:
                raise SystemExit(f"mire embed: {exc}") from None
        from mirecc.encoder.runtime import EmbedError  # lazy: as Encoder
        try:
            results[f] = encoder.embed_file(f, clang=args.clang, flags=flags).to_json()
        except EmbedError as exc:
            print(f"mire embed: {exc}", file=sys.stderr)
            status = 1
    return results, status


def run(args) -> int:
    try:
        results, status = _embed_all(args)
    except SystemExit as exc:   # the model cannot be loaded
        print(exc, file=sys.stderr)
        return 2
    want = GRANULARITIES[args.granularity]
    if args.stats:
        for f, e in results.items():
            print(f"{f}: {e['stats']}", file=sys.stderr)
    if args.output and args.output.endswith(".npz"):
        import numpy as np  # lazy: numpy (~150 ms), .npz output only
        arrays = {}
        for f, e in results.items():
            if "module" in want:
                arrays[f"module/{f}"] = np.asarray(e["module"], dtype=np.float32)
            for kind in ("functions", "loops"):
                if kind in want:
                    arrays.update({f"{kind[:-1]}/{f}/{k}": np.asarray(v, dtype=np.float32)
                                   for k, v in e[kind].items()})
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        atomic_write_bytes(Path(args.output), buf.getvalue())
        return status
    doc = {"files": {f: {k: v for k, v in e.items() if k in want + ("stats",)}
                     for f, e in results.items()}}
    text = json.dumps(doc, indent=1 if args.output else None) + "\n"
    if args.output:
        atomic_write_bytes(Path(args.output), text.encode())
    else:
        sys.stdout.write(text)
    return status
