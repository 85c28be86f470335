#!/usr/bin/env python3
"""Block-shape labels for CUDA programs of other suites (Rodinia, NVIDIA's
CUDA Samples): their own knobs set by mirecc-nvcc, timed on a GPU with their
outputs compared.

Two steps, on two machines:

    # here (mirecc installed, nvcc, no GPU needed): sources, every shape's build
    python -m mirecc.tasks.cuda_block.offline.suite_labels prepare \\
        --rodinia <gpu-rodinia checkout or git dir> --samples <cuda-samples ...> \\
        --out .work/cuda-suites
    # on the GPU machine (standard library only; the bundle is carried there)
    python3 mirecc/tasks/cuda_block/offline/suite_labels.py run \\
        --bundle .work/cuda-suites --out "$OUT/suites" --deadline-s 540

``prepare`` exports each program of :data:`PROGRAMS` from the suites' git
trees, builds it once with nvcc (the source's shapes) and, for each shape
mirecc could give it, once with ``mirecc-nvcc`` and a decisions profile
naming the shape for every tunable kernel of its CUDA source: the knob is
set as a user's build sets it (a ``-D``, or the rewritten copy), so what is
timed is what mirecc builds.  A program's shapes are the MIREncoder paper's
20 (the head's, ``cuda_labels.paper_shapes``), each given to every tunable
kernel as far as its knob allows (:func:`mirecc.tasks.cuda_block.head.kernel_value`:
a square knob takes only square shapes, a 1-D knob only x, powers of two);
shapes that give every kernel the same blocks are built once, and a shape
that gives the source's blocks is the source.  A decision the record says
was not applied, or a build whose object equals the source's, is an error.
Binaries link the CUDA runtime shared (``-cudart shared``) and target
``--arch`` (sm_90: H100 and H200); ``plan.json`` lists them.

``run`` times every binary of a program and size in rounds, the order
rotated per round, one process at a time, under ``kernel_probe.c`` (a CUPTI
injection library it builds with the machine's CUDA: the sum of the
kernels' GPU durations, and an FNV digest of every byte the program copies
back from the device).  A run's output is that digest, the files the
program writes and its standard output without the lines that print the
shape or a time (the program's ``drop``); a shape is wrong where any of its
runs' output differs from the source shape's first, or a run failed.
Output, as ``cuda_labels``'s (its ``Recorder`` and ``summarize``):
``cuda_labels.jsonl`` (phases ``time`` and, per round, a ``check`` per
build; ``gpu_seconds`` the kernels' sum), ``cuda_machine.json``,
``cuda_summary.txt``, ``cuda_log.txt``.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if __package__:
    from . import cuda_labels as cl
else:             # run by path on a GPU machine (no mirecc installed): the sibling script
    sys.path.insert(0, HERE)
    import cuda_labels as cl  # noqa: E402  (shapes, machine, summary)


def _hotspot_inputs(work: str, n: int) -> dict[str, str]:
    """Rodinia hotspot's temperature and power files for an n x n chip, one
    value per line, from a fixed formula (the suite's data files are not in
    its repository)."""
    names = {}
    for what, base, scale in (("temp", 323.0, 7.0), ("power", 0.0, 2.5e-6)):
        path = os.path.join(work, f"{what}_{n}")
        if not os.path.exists(path):
            with open(path + ".tmp", "w") as fh:
                for i in range(n * n):
                    r, c = divmod(i, n)
                    fh.write(f"{base + scale * (((r * 7 + c * 13) % 101) / 101.0):.6f}\n")
            os.replace(path + ".tmp", path)
        names[what] = path
    return names


#: program -> how it is built and run.  ``tree``: the suite; ``dir``: the
#: program's folder there; ``tus``: its translation units (the first holds
#: the tunable launches); ``include``: folders of the tree on the include
#: path; ``flags``: what a CUDA 13 nvcc needs for old code; ``sizes``:
#: size label -> arguments (``{out}`` a file the run writes, compared;
#: ``{temp}``/``{power}`` hotspot's inputs); ``drop``: standard-output lines
#: that print the shape or a time.  Chosen from docs/results/cuda-knobs.md's
#: tunable launches: not particlefilter (it seeds its generator from the
#: clock), dwt2d (its input is an image the suite does not ship), scan (its
#: knob also sets sizes main.cpp reads: refused).
PROGRAMS = {
    "gaussian": {
        "tree": "rodinia", "dir": "cuda/gaussian", "tus": ["gaussian.cu"], "include": [],
        # deviceProp.clockRate and .deviceOverlap left CUDA 13; only a printout reads them
        "flags": ["-DclockRate=multiProcessorCount", "-DdeviceOverlap=asyncEngineCount",
                  "-DcudaThreadSynchronize=cudaDeviceSynchronize"],
        "sizes": {"S1024": ["-s", "1024", "-q"], "S2048": ["-s", "2048", "-q"]},
        "drop": r"WG size|Time",
    },
    "hotspot": {
        "tree": "rodinia", "dir": "cuda/hotspot", "tus": ["hotspot.cu"], "include": [],
        "flags": ["-DcudaThreadSynchronize=cudaDeviceSynchronize"],
        "sizes": {"G512": ["512", "2", "2000", "{temp}", "{power}", "{out}"],
                  "G1024": ["1024", "2", "1000", "{temp}", "{power}", "{out}"]},
        "drop": r"WG size|blockGrid|targetBlock",
    },
    "pathfinder": {
        "tree": "rodinia", "dir": "cuda/pathfinder", "tus": ["pathfinder.cu"], "include": [],
        "flags": ["-DcudaThreadSynchronize=cudaDeviceSynchronize"],
        "sizes": {"C100k": ["100000", "100", "20"], "C200k": ["200000", "200", "20"]},
        "drop": r"blockSize|blockGrid|targetBlock|Exec",
    },
    "convolutionSeparable": {
        "tree": "cuda-samples", "dir": "Samples/2_Concepts_and_Techniques/convolutionSeparable",
        "tus": ["convolutionSeparable.cu", "main.cpp", "convolutionSeparable_gold.cpp"],
        "include": ["Common"], "flags": [],
        "sizes": {"W3072": []},
        "drop": r"Throughput",
    },
    "vectorAdd": {
        "tree": "cuda-samples", "dir": "Samples/0_Introduction/vectorAdd",
        "tus": ["vectorAdd.cu"], "include": ["Common"], "flags": [],
        "sizes": {"N50000": []},
        "drop": r"blocks of",
    },
}
#: HeCBench (zjin-lcf/HeCBench): programs whose launches the knob analysis
#: finds tunable, one CUDA file each, numeric arguments only, no atomics in
#: that file, deterministic inputs; the arguments are those of the
#: program's Makefile ``run`` target with its repeat count cut, and the
#: problem cut where the program's CPU reference would take seconds on one
#: core (keogh, epistasis, iso2dfd, flip, glu, tissue; vol2col's is fixed at
#: 6 s: left out): program -> (its CUDA file, arguments)
HECBENCH = {
    "adam": ("main.cu", "10000 200 10"), "aobench": ("ao.cu", "10"),
    "debayer": ("main.cu", "4096 4096 10"),
    "fhd": ("main.cu", "20000 2097152 0"), "flip": ("main.cu", "3 256 10"),
    "glu": ("main.cu", "3 256 10"), "hellinger": ("main.cu", "10"),
    "iso2dfd": ("iso2dfd.cu", "1024 1024 100"), "keogh": ("main.cu", "256 500000 10"),
    "laplace3d": ("main.cu", "128 128 128 100 1"), "mandelbrot": ("main.cu", "100"),
    "mrc": ("main.cu", "10000000 20"), "murmurhash3": ("murmurhash3.cu", "100000 10"),
    "relu": ("main.cu", "10000000 100"), "remap": ("main.cu", "10000000 20"),
    "zeropoint": ("main.cu", "10000000 10"),
    "haccmk": ("haccmk.cu", "20"), "projectile": ("Projectile.cu", "20"),
    "tissue": ("main.cu", "16 10"), "popcount": ("main.cu", "16777216 20"),
    "layout": ("main.cu", "20"), "pnpoly": ("main.cu", "10"),
    "epistasis": ("main.cu", "146 1024 5"),
}
for _name, (_cu, _args) in HECBENCH.items():
    PROGRAMS[f"hec-{_name}"] = {
        "tree": "hecbench", "dir": f"src/{_name}-cuda", "tus": [_cu], "include": [],
        "flags": [], "sizes": {"default": _args.split()},
        "drop": r"(?i)\btime\b|throughput|bandwidth|GB/s|gflop|elapsed|\bsec\b|\(us\)|\(ms\)"}
#: the files of each tree a program needs beyond its folder
TREE_FILES = {"rodinia": [], "hecbench": ["src/include"], "cuda-samples": [
    "Common/helper_cuda.h", "Common/helper_functions.h", "Common/helper_string.h",
    "Common/helper_timer.h", "Common/helper_image.h", "Common/exception.h"]}
SOURCE_SUFFIXES = (".cu", ".cuh", ".cpp", ".c", ".h", ".hpp")
ARCH = "sm_90"


# ------------------------------------------------------------------ prepare

def _git_dir(path: str) -> str:
    for candidate in (os.path.join(path, ".git"), os.path.join(path, "repo"), path):
        if os.path.isdir(candidate) and os.path.exists(os.path.join(candidate, "HEAD")):
            return candidate
    raise SystemExit(f"suite_labels: {path}: no git repository (a checkout, or a fetched "
                     "mirror's git directory)")


def export(git_dir: str, paths: list[str], dest: str) -> str:
    """The files under ``paths`` at the tree's HEAD (sources only) into
    ``dest``; returns the commit."""
    git = ["git", "--git-dir", git_dir]
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    listed = subprocess.run([*git, "ls-tree", "-r", "--name-only", "HEAD", "--", *paths],
                            check=True, capture_output=True, text=True).stdout.split("\n")
    files = [f for f in listed if f.endswith(SOURCE_SUFFIXES)]
    # one git process for every blob (``cat-file --batch``: a header line,
    # the bytes, a newline each); a blob the mirror lacks is reported missing
    batch = subprocess.run([*git, "cat-file", "--batch"], check=True, capture_output=True,
                           input="".join(f"HEAD:{name}\n" for name in files).encode()).stdout
    at = 0
    for name in files:
        end = batch.index(b"\n", at)
        header = batch[at:end].split()
        at = end + 1
        if header[-1] == b"missing":
            continue
        size = int(header[2])
        target = os.path.join(dest, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as fh:
            fh.write(batch[at:at + size])
        at += size + 1
    return commit


def _compile(cmd: list[str], env=None) -> None:
    code, out = cl._run(cmd, timeout=900, env=env)
    if code != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {out.strip()[-800:]}")


def _shape_label(shape) -> str:
    return f"{shape[0]}x{shape[1]}"


def variants(plan, tunable: list[str]) -> list[tuple[tuple[int, int], dict]]:
    """The paper's shapes the head may give the source
    (:func:`mirecc.tasks.cuda_block.head.shape_blocks`: every tunable kernel
    takes it, one at least changes), each with the blocks it gives them
    (kernel -> (x, y)); of shapes that give the same blocks, the first."""
    # lazy: only prepare needs mirecc; run (by path, on the GPU machine) has none
    from mirecc.tasks.cuda_block.head import shape_blocks

    out, seen = [], set()
    for shape in cl.paper_shapes():
        values = shape_blocks([plan.blocks[k] for k in tunable], shape)
        if values is not None and values not in seen:
            seen.add(values)
            out.append((shape, dict(zip(tunable, values))))
    return out


def _prepare_program(name, spec, args, out, src_root, nvcc, mirecc_nvcc, base_env) -> dict:
    """One program's builds (the source's and each shape's) and its plan entry."""
    # lazy: only prepare needs mirecc; run (by path, on the GPU machine) has none
    from mirecc.frontend import nvcc as front
    from mirecc.frontend.launches import scan_source
    from mirecc.tasks.cuda_block import launches

    folder = os.path.join(src_root, spec["tree"], spec["dir"])
    tree = os.path.join(src_root, spec["tree"])
    flags = ["-O3", f"-arch={args.arch}", "-w", *spec["flags"],
             *[f"-I{os.path.join(tree, i)}" for i in spec["include"]], f"-I{folder}"]
    build = os.path.join(out, "build", name)
    os.makedirs(build)
    cu = os.path.join(folder, spec["tus"][0])
    cmd = front.parse([*flags, "-c", cu])
    plan = launches.plan_source(scan_source(cu, cmd), cmd)
    tunable = [k for k, b in plan.blocks.items() if b.tunable]
    if not tunable:
        raise SystemExit(f"suite_labels: {name}: no tunable launch in {spec['tus'][0]} "
                         f"({'; '.join(b.note for b in plan.blocks.values())})")
    # the other translation units: once, by nvcc
    others = []
    for tu in spec["tus"][1:]:
        obj = os.path.join(build, os.path.splitext(tu)[0] + ".o")
        _compile([nvcc, *flags, "-c", os.path.join(folder, tu), "-o", obj])
        others.append(obj)

    def link(obj, exe):
        _compile([nvcc, f"-arch={args.arch}", "-cudart", "shared", obj, *others, "-o", exe])

    src_obj = os.path.join(build, "source.o")
    _compile([nvcc, *flags, "-c", cu, "-o", src_obj])
    record = os.path.join(build, "record.jsonl")
    _compile([mirecc_nvcc, *flags, "-c", cu, "-o", os.path.join(build, "recorded.o")],
             env={**base_env, "MIRECC_RECORD": record})
    with open(record) as fh:
        decisions = [d for line in fh for d in json.loads(line)["decisions"]]
    digests = {d["target"]: d["digest"] for d in decisions}
    bindir = os.path.join(out, "bin", name)
    os.makedirs(bindir)
    own = {k: tuple(int(v) for v in plan.blocks[k].default) for k in tunable}
    rows = [{"label": "source", "shape": None, "blocks": own, "source": True}]
    rows += [{"label": _shape_label(s), "shape": list(s), "blocks": b, "source": False}
             for s, b in variants(plan, tunable)]
    source_bytes = front.normalised_object(src_obj)
    for row in rows:
        exe = os.path.join(bindir, row["label"])
        if row["source"]:
            link(src_obj, exe)
        else:
            profile = os.path.join(build, f"{row['label']}.profile")
            with open(profile, "w") as fh:
                for k, (x, y) in row["blocks"].items():
                    if (x, y) != own[k]:
                        fh.write(f"cuda-block {cu} {k} {digests[k]} {x}x{y}\n")
            obj = os.path.join(build, f"{row['label']}.o")
            rec = os.path.join(build, f"{row['label']}.record.jsonl")
            _compile([mirecc_nvcc, *flags, "-c", cu, "-o", obj],
                     env={**base_env, "MIRECC_PROFILE": profile, "MIRECC_RECORD": rec})
            with open(rec) as fh:
                made = {d["target"]: d for line in fh for d in json.loads(line)["decisions"]}
            for k, (x, y) in row["blocks"].items():
                got = made.get(k, {}).get("value") or {}
                if (got.get("x"), got.get("y")) != (x, y):
                    raise SystemExit(f"suite_labels: {name} {row['label']}: mirecc-nvcc "
                                     f"gave {k} {got}, not {x}x{y}")
            if front.normalised_object(obj) == source_bytes:
                raise SystemExit(f"suite_labels: {name} {row['label']}: the object "
                                 "is the source's: the shape was not applied")
            link(obj, exe)
        row["binary"] = os.path.relpath(exe, out)
        row["blocks"] = {k: _shape_label(v) for k, v in row["blocks"].items()}
    print(f"suite_labels: {name}: {len(rows) - 1} shapes besides the source's "
          f"({', '.join(tunable)})", file=sys.stderr)
    return {"tree": spec["tree"], "dir": spec["dir"], "cu": os.path.relpath(cu, out),
            "flags": [f if not f.startswith("-I") else "-I" + os.path.relpath(f[2:], out)
                      for f in flags],
            "kernels": tunable, "sizes": spec["sizes"], "drop": spec["drop"],
            "variants": rows}


def prepare(args) -> None:
    out = os.path.abspath(args.out)
    src_root = os.path.join(out, "src")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(src_root)
    nvcc = cl.find_nvcc(args.nvcc)
    mirecc_nvcc = args.mirecc_nvcc or shutil.which("mirecc-nvcc") or os.path.join(
        os.path.dirname(sys.executable), "mirecc-nvcc")
    given = {"rodinia": args.rodinia, "cuda-samples": args.samples, "hecbench": args.hecbench}
    trees = {tree: _git_dir(path) for tree, path in given.items() if path}
    if not trees:
        raise SystemExit("suite_labels prepare: no suite given (--rodinia, --samples, "
                         "--hecbench)")
    commits = {}
    for tree, git_dir in trees.items():
        paths = [p["dir"] for p in PROGRAMS.values() if p["tree"] == tree] + TREE_FILES[tree]
        commits[tree] = export(git_dir, paths, os.path.join(src_root, tree))
    plan_out = {"arch": args.arch, "nvcc": nvcc, "commits": commits, "programs": {},
                "left_out": {}}
    # mirecc-nvcc drives the same nvcc (--cc: the clang that reads its device
    # IR, else mirecc's own choice); no other setting of the caller's
    base_env = {**{k: v for k, v in os.environ.items() if not k.startswith("MIRECC_")},
                "MIRECC_NVCC": nvcc, **({"MIRECC_CC": args.cc} if args.cc else {})}
    for name, spec in PROGRAMS.items():
        if spec["tree"] not in trees or args.programs and name not in args.programs.split(","):
            continue
        try:
            plan_out["programs"][name] = _prepare_program(
                name, spec, args, out, src_root, nvcc, mirecc_nvcc, base_env)
        except (RuntimeError, SystemExit, KeyError, OSError) as exc:
            # a program that does not build here is left out, said why
            plan_out["left_out"][name] = str(exc)[-400:]
            print(f"suite_labels: {name}: left out: {str(exc)[-300:]}", file=sys.stderr)
        shutil.rmtree(os.path.join(out, "build", name), ignore_errors=True)
    with open(os.path.join(out, "plan.json.tmp"), "w") as fh:
        json.dump(plan_out, fh, indent=1, sort_keys=True)
    os.replace(os.path.join(out, "plan.json.tmp"), os.path.join(out, "plan.json"))
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
    print(f"suite_labels: {out}: {size / 2**20:.1f} MiB", file=sys.stderr)


# ------------------------------------------------------------------ run (GPU)

def _cuda_dirs() -> tuple[str | None, list[str], list[str]]:
    """The machine's CUDA: its root, the folders with cupti.h, those with
    libcupti.so / libcudart.so."""
    roots = [os.environ.get("CUDA_HOME"), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    for root in filter(None, roots):
        if not os.path.isdir(root):
            continue
        inc, lib = [], []
        for d, _, files in os.walk(root):
            if "cupti.h" in files or "cuda_runtime_api.h" in files:
                inc.append(d)
            if any(f.startswith(("libcupti.so", "libcudart.so")) for f in files):
                lib.append(d)
        if inc and lib:
            return root, sorted(set(inc)), sorted(set(lib))
    return None, [], []


def build_probe(work: str) -> tuple[str, dict]:
    root, inc, lib = _cuda_dirs()
    if root is None:
        raise SystemExit("suite_labels: no CUDA toolkit with CUPTI found")
    probe = os.path.join(work, "kernel_probe.so")
    cmd = ["gcc", "-O2", "-shared", "-fPIC", *[f"-I{d}" for d in inc],
           os.path.join(HERE, "kernel_probe.c"), *[f"-L{d}" for d in lib], "-lcupti",
           "-lpthread", "-o", probe]
    _compile(cmd)
    env_lib = ":".join([*lib, os.environ.get("LD_LIBRARY_PATH", "")]).strip(":")
    return probe, {"LD_LIBRARY_PATH": env_lib}


def run_once(binary: str, name: str, argv: list[str], drop: str, probe: str, env: dict,
             work: str, timeout: float, wall: bool = False) -> dict:
    """One run of ``binary`` (as ``name``) under the probe: status, the
    kernels' seconds (``wall``: the process's, where the probe reports
    nothing on this machine), the output's digest."""
    out_file = os.path.join(work, "out.dat")
    probe_file = os.path.join(work, "probe.json")
    for f in (out_file, probe_file):
        if os.path.exists(f):
            os.remove(f)
    args = [a.replace("{out}", out_file) for a in argv]
    t0 = time.monotonic()
    try:
        done = subprocess.run([name, *args], executable=binary, cwd=work, capture_output=True,
                              timeout=timeout, env={**os.environ, **env,
                                                    "CUDA_INJECTION64_PATH": probe,
                                                    "MIRECC_PROBE_OUT": probe_file})
        status = "ok" if done.returncode == 0 else "crash"
        rc, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired:
        status, rc, stdout, stderr = "timeout", None, b"", b""
    elapsed = time.monotonic() - t0
    kept = [line for line in stdout.decode(errors="replace").split("\n")
            if not re.search(drop, line)]
    digest = hashlib.sha256("\n".join(kept).encode())
    if os.path.exists(out_file):
        with open(out_file, "rb") as fh:
            digest.update(fh.read())
    probed = None
    if os.path.exists(probe_file):
        with open(probe_file) as fh:
            probed = json.load(fh)
        digest.update(f"{probed['d2h_bytes']}:{probed['d2h_fnv']}".encode())
    elif status == "ok" and not wall:
        status = "no_probe"
    seconds = round(elapsed, 4)
    return {"status": status, "returncode": rc, "wall_s": seconds,
            "measure": "wall" if wall else "kernels",
            "gpu_seconds": seconds if wall else probed["kernel_ns"] * 1e-9 if probed else None,
            "kernels": {k["name"]: [k["launches"], k["ns"]] for k in probed["kernels"]}
            if probed else None,
            "api_errors": probed["api_errors"] if probed else None,
            "dropped": probed["dropped"] if probed else None,
            "output": digest.hexdigest()[:16],
            "stdout_tail": "" if status == "ok" else
            (stdout + stderr).decode(errors="replace")[-300:]}


def _shape_fields(variant: dict, spec: dict) -> dict:
    """A row's shape: the paper's shape it was built for (``source`` for
    the source's, with its first tunable kernel's block as its x and y), the
    tunable kernels' blocks in the source's order, and the suite."""
    first = variant["blocks"][spec["kernels"][0]]
    x, y = variant["shape"] or first.split("x")
    return {"shape": "source" if variant["source"] else variant["label"],
            "shape_x": int(x), "shape_y": int(y), "is_source_shape": variant["source"],
            "block": " ".join(f"{k}:{variant['blocks'][k]}" for k in spec["kernels"]),
            "suite": spec.get("tree", "")}


def _argv(spec: dict, size: str, work: str) -> list[str]:
    """A size's arguments, its input files made (``{temp}``, ``{power}``:
    hotspot's, for the chip size its first argument gives)."""
    argv = list(spec["sizes"][size])
    if any("{temp}" in a or "{power}" in a for a in argv):
        files = _hotspot_inputs(work, int(argv[0]))
        argv = [a.replace("{temp}", files["temp"]).replace("{power}", files["power"])
                for a in argv]
    return argv


def _preflight(plan, chosen, bundle, probe, env, work, timeout, rec) -> bool:
    """Whether runs must be timed whole: the programs' source builds run
    once each (not recorded) until one runs, and the probe reported
    nothing for it."""
    for program in chosen:
        spec = plan["programs"][program]
        size = next(iter(spec["sizes"]))
        source = next(v for v in spec["variants"] if v["source"])
        r = run_once(os.path.join(bundle, source["binary"]), program, _argv(spec, size, work),
                     spec["drop"], probe, env, work, timeout)
        rec.log(f"preflight {program} {size}: {r['status']}, kernels {r['gpu_seconds']} s")
        if r["status"] == "no_probe":
            rec.log(f"the probe wrote nothing ({r['stdout_tail']!r}): every run is timed whole "
                "(measure 'wall')")
            return True
        if r["status"] == "ok":
            return False
    return False


def _round(case, rnd, bundle, probe, env, work, timeout, wall, deadline, rec) -> None:
    """One round of a (program, size): each build once, the order rotated by
    the round; a ``time`` row per run, then a ``check`` row per build with
    its runs so far whose output differed from the source's first."""
    spec, variants = case["spec"], case["spec"]["variants"]
    order = variants[rnd % len(variants):] + variants[:rnd % len(variants)]
    for v in order:
        if time.monotonic() > deadline:
            break
        r = run_once(os.path.join(bundle, v["binary"]), case["program"], case["argv"],
                     spec["drop"], probe, env, work, timeout, wall)
        if v["source"] and case["reference"] is None and r["status"] == "ok":
            case["reference"], case["errors"] = r["output"], r["api_errors"]
        if r["status"] == "ok" and (r["api_errors"] or 0) > (case["errors"] or 0):
            # a launch or copy failed that the program did not check
            r["status"] = "cuda_error"
            r["cuda_error"] = (f"{r['api_errors']} CUDA runtime calls failed "
                               f"(the source's run: {case['errors']})")
        case["results"][v["label"]].append(r)
        rec.write({"program": case["program"], "size": case["size"], "phase": "time",
                   "repeat": rnd, **_shape_fields(v, spec), "applied": v["blocks"],
                   "cuda_error": None, "mismatches": None, **r})
    for v in variants:
        runs = case["results"][v["label"]]
        if runs:        # the last check row of a build counts: every run so far
            rec.write({
                "program": case["program"], "size": case["size"], "phase": "check",
                **_shape_fields(v, spec),
                "status": "ok" if case["reference"] else "no_reference", "cuda_error": None,
                "mismatches": sum(r["output"] != case["reference"] for r in runs),
                "runs": len(runs)})


def run(args) -> None:
    bundle = os.path.abspath(args.bundle)
    with open(os.path.join(bundle, "plan.json")) as fh:
        plan = json.load(fh)
    os.makedirs(args.out, exist_ok=True)
    rec = cl.Recorder(args.out)      # cuda_labels.jsonl, cuda_log.txt
    deadline = time.monotonic() + args.deadline_s
    work = tempfile.mkdtemp(prefix="suite-labels-")
    if args.probe:       # built already (and its libraries on the loader's path)
        probe, env = os.path.abspath(args.probe), {}
    else:
        probe, env = build_probe(work)
    rec.log(f"probe: {probe}; LD_LIBRARY_PATH={env.get('LD_LIBRARY_PATH', '(as it is)')}")
    with open(os.path.join(args.out, "cuda_machine.json"), "w") as fh:
        json.dump({"machine": cl.machine_info(cl.find_nvcc()), "platform": platform.platform(),
                   "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                   "args": vars(args), "plan": plan}, fh, indent=1, default=str)
    chosen = [p for p in plan["programs"] if not args.programs or p in args.programs.split(",")]
    wall = _preflight(plan, chosen, bundle, probe, env, work, args.call_timeout, rec)
    # breadth first: every (program, size) gets a round before any gets the
    # next, so that the deadline leaves each case the same number of rounds
    cases = [{"program": p, "size": s, "spec": plan["programs"][p],
              "argv": _argv(plan["programs"][p], s, work), "reference": None, "errors": None,
              "results": {v["label"]: [] for v in plan["programs"][p]["variants"]}}
             for p in chosen for s in plan["programs"][p]["sizes"]]
    for rnd in range(args.repeats):
        for case in cases:
            if time.monotonic() > deadline:
                break
            if rnd and case["reference"] is None:
                continue          # its source build never ran: nothing to compare with
            _round(case, rnd, bundle, probe, env, work, args.call_timeout, wall, deadline, rec)
        rec.log(f"round {rnd + 1} done" if time.monotonic() <= deadline else
                f"deadline reached in round {rnd + 1}")
        if time.monotonic() > deadline:
            break
    for case in cases:
        times = {lab: sorted(r["gpu_seconds"] for r in rs if r["status"] == "ok"
                             and r["gpu_seconds"]) for lab, rs in case["results"].items()}
        rec.log(f"{case['program']} {case['size']}: " + ", ".join(
            f"{lab} {len(t)}x {t[len(t) // 2] * 1e3:.3f} ms" for lab, t in times.items() if t)
            + ("" if times.get("source") else "; no source time"))
    shutil.rmtree(work, ignore_errors=True)
    with open(os.path.join(args.out, "cuda_summary.txt"), "w") as fh:
        fh.write(cl.summarize(rec.records, chosen, lambda p: plan["programs"][p]["sizes"],
                              "other suites' programs (suite_labels)"))
    rec.close()


def head_report(args) -> None:
    """What the installed head decides on each bundled program, compile only:
    ``mirecc-nvcc --explain=json`` with ``MIRECC_APPLY_CUDA_BLOCK=1`` on its
    tunable source, as prepared (no GPU, nothing timed)."""
    bundle = os.path.abspath(args.bundle)
    with open(os.path.join(bundle, "plan.json")) as fh:
        plan = json.load(fh)
    mirecc_nvcc = shutil.which("mirecc-nvcc") or os.path.join(os.path.dirname(sys.executable),
                                                               "mirecc-nvcc")
    env = {**os.environ, "MIRECC_APPLY_CUDA_BLOCK": "1",
           **({"MIRECC_NVCC": plan["nvcc"]} if plan.get("nvcc") else {})}
    applied = 0
    with tempfile.TemporaryDirectory(prefix="suite-head-") as tmp:
        for name, spec in sorted(plan["programs"].items()):
            flags = [f if not f.startswith("-I") else "-I" + os.path.join(bundle, f[2:])
                     for f in spec["flags"]]
            code, out = cl._run([mirecc_nvcc, "--explain=json", *flags, "-c",
                                 os.path.join(bundle, spec["cu"]), "-o",
                                 os.path.join(tmp, "k.o")], timeout=900, env=env)
            try:
                units = json.loads(out[out.index("{"):])["translation_units"]
            except ValueError:
                print(f"{name}: no explanation ({code}): {out.strip()[-200:]}")
                continue
            made = [f"{d['target']} {d['value']}" for u in units for d in u["decisions"]
                    if d.get("applied")]
            applied += bool(made)
            print(f"{name}: {', '.join(made) or 'the source shapes kept'}")
    print(f"{applied} of {len(plan['programs'])} programs get a shape from the head")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="suite_labels", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="step", required=True)
    p = sub.add_parser("prepare", help="export the programs and build every shape (no GPU)")
    p.add_argument("--rodinia", help="yuhc/gpu-rodinia: a checkout or git dir")
    p.add_argument("--samples", help="NVIDIA/cuda-samples: a checkout or git dir")
    p.add_argument("--hecbench", help="zjin-lcf/HeCBench: a checkout or git dir")
    p.add_argument("--out", required=True)
    p.add_argument("--arch", default=ARCH)
    p.add_argument("--nvcc")
    p.add_argument("--mirecc-nvcc")
    p.add_argument("--cc", help="the clang mirecc-nvcc reads device IR with "
                                "(MIRECC_CC; default: mirecc's own choice)")
    p.add_argument("--programs", help="comma-separated subset of " + ",".join(PROGRAMS))
    r = sub.add_parser("run", help="time every build on this machine's GPU")
    r.add_argument("--bundle", required=True, help="prepare's --out")
    r.add_argument("--out", required=True)
    r.add_argument("--deadline-s", type=float, default=540.0)
    r.add_argument("--repeats", type=int, default=5, help="timing rounds (at most)")
    r.add_argument("--call-timeout", type=float, default=60.0)
    r.add_argument("--programs")
    r.add_argument("--probe", help="a kernel_probe.so built already (default: build one)")
    h = sub.add_parser("head", help="what the installed head applies to each bundled program "
                                     "(compile only)")
    h.add_argument("--bundle", required=True, help="prepare's --out")
    args = ap.parse_args(argv)
    {"prepare": prepare, "run": run, "head": head_report}[args.step](args)


if __name__ == "__main__":
    main()
