"""Code size at the link step: a program or library linked with ``-flto``
at ``-Oz``/``-Os`` is optimised and compiled as one module by the linker's
LTO plugin, so a TU's candidates never see it (a ``-flto`` compile writes
bitcode, and is not split).  After the user's own link has made the output,
the step links it again with each of :data:`LINK_OPTIONS` given to the LTO
back end (beside the user's link where make's jobserver has a free slot,
else ``size_jobs`` at once), and keeps the output with the fewest loadable bytes (every
allocated section); the user's own link wins ties, so the output is never
larger than clang's and, when no candidate is smaller, it is clang's byte for
byte.  An output the outliner miscompiled, or one without a symbol table to
check that in, is not kept (:func:`.build.check_outlined`).

The options are the library's back-end options (:data:`.build.CANDIDATE_OPTIONS`,
each with its correctness record from ``mire size-check``), handed to the
linker's LTO plugin as ``-Wl,-plugin-opt=<option>`` (gold's and bfd's LLVM
plugin and lld read it).  Each costs one more link: the whole program's
optimisation and code generation again.

Standard library only until a link wants the step (:meth:`LinkStep.wants`
runs on every link-only call at -Oz/-Os).
"""
from __future__ import annotations

import os

from mirecc.taskapi.api import LinkStep

#: the library's back-end options tried at the link, by name
LINK_OPTIONS = ("machine-outliner",)


def lto_link(args: list[str]) -> bool:
    """Does the command link with LTO (its last -flto/-fno-lto says so)?"""
    lto = False
    for a in args:
        if a == "-flto" or a.startswith("-flto="):
            lto = True
        elif a == "-fno-lto":
            lto = False
    return lto


def link_flags(name: str) -> list[str]:
    """The link flags that give the option ``name`` to the LTO back end."""
    from mirecc.tasks.code_size.build import CANDIDATE_OPTIONS  # lazy: as in link()

    tool, flags = CANDIDATE_OPTIONS[name]
    if tool != "backend":
        raise ValueError(f"{name}: not a back-end option")
    return [f"-Wl,-plugin-opt={f}" for f in flags if f != "-mllvm"]


class OutlinedLink(LinkStep):
    """The task's link step (``Task.link_step()``): an ``-flto`` link at a
    size level linked again with the machine outliner, the smaller kept."""

    @staticmethod
    def wants(args: list[str], config) -> bool:
        """An LTO link (the driver asks only for a link into a file), with
        the step on (``size_link``)."""
        return bool(config.size_link) and lto_link(args) and "-r" not in args

    @staticmethod
    def link(command: list[str], output: str, config, own_link):
        """The user's link (``own_link()``: runs ``command`` as asked, its
        exit status) and, beside it where make's jobserver has a free slot
        (else ``size_jobs``), ``command`` again with each option into a
        hidden file beside ``output``; the smallest output is kept.
        (exit status, counters, a Verified for --explain or None)."""
        # lazy: only a link the step wants (wants() runs on every link at -Oz/-Os)
        import subprocess
        from mirecc.util.jobserver import slots

        directory, name = os.path.split(output)
        temps = [os.path.join(directory, f".{name}.mirecc-{os.getpid()}-link{n}.tmp")
                 for n in range(len(LINK_OPTIONS))]

        def start(n: int):
            return subprocess.Popen([*command, *link_flags(LINK_OPTIONS[n]), "-o", temps[n]],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE)

        procs = {}
        try:
            with slots(1 + len(LINK_OPTIONS), getattr(config, "size_jobs", 1)) as at_once:
                for n in range(min(at_once - 1, len(LINK_OPTIONS))):
                    procs[n] = start(n)            # beside the user's link
                rc = own_link()
                if rc != 0 or not os.path.isfile(output):
                    return rc, {}, None
                return rc, *_keep_smallest(output, temps, procs, start)
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate()
            for temp in temps:
                _remove(temp)


def _keep_smallest(output: str, temps: list[str], procs: dict, start):
    """Wait for (or run) each candidate link; move the smallest over
    ``output`` when it has fewer loadable bytes.  (counters, Verified)."""
    # lazy: as in OutlinedLink.link()
    import subprocess
    from mirecc.tasks.code_size.build import STEP_TIMEOUT_S, check_outlined, object_sizes
    from mirecc.tasks.code_size.verify import Verified

    own = "your link"
    sizes, texts, skipped = {}, {}, {}
    sizes[own], texts[own] = object_sizes(output)
    best = own
    for n, option in enumerate(LINK_OPTIONS):
        proc = procs.get(n) or start(n)
        procs[n] = proc
        try:
            _, err = proc.communicate(timeout=STEP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            skipped[option] = f"the link ran over {STEP_TIMEOUT_S} s"
            continue
        if proc.returncode != 0:
            first = (err.decode(errors="replace").strip().splitlines() or ["?"])[0]
            skipped[option] = f"the link failed: {first}"
            continue
        try:
            check_outlined(temps[n])
            sizes[option], texts[option] = object_sizes(temps[n])
        except Exception as exc:  # noqa: BLE001 - an output it cannot read is not kept
            skipped[option] = str(exc)
            continue
        if sizes[option] < sizes[best]:
            best = option
    if best != own:
        os.replace(temps[LINK_OPTIONS.index(best)], output)
    counts = {"links.code-size": 1}
    if best != own:
        counts["links.code-size.improved"] = 1
    if skipped:
        counts["links.code-size.failed"] = 1
    return counts, Verified(sizes=sizes, winner=best, skipped=skipped, own=own,
                            built=len(sizes) - 1, text=texts,
                            note=f"linked again with {len(LINK_OPTIONS)} LTO option(s)")


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


LINK = OutlinedLink()
