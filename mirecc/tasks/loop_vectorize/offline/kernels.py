"""Deterministic generator of small C programs, each with one target loop.

Every program has a ``__attribute__((noinline))`` function ``kernel`` whose
innermost target loop is preceded by the macro ``MIRECC_LOOP_HINT`` (empty by
default), so that the dataset runner can force a vectorization width and an
interleave count with::

    -DMIRECC_LOOP_HINT='_Pragma("clang loop vectorize_width(4) interleave_count(2)")'

``main`` reads the sizes from argv, fills the inputs with an LCG, calls
``kernel`` in a timed repeat loop and prints::

    reps <calls timed>
    time_ns <ns per call>
    checksum <16 hex digits: FNV-1a of the output bytes / returned value>
    value <sum of the outputs as a double, %.17g>

The number of timed calls comes from the environment: ``MIRECC_REPS`` (>0:
exactly that many) or, when it is unset or 0, doubling until one measurement
takes ``MIRECC_TARGET_NS`` (default 15e6). Every kernel is idempotent (its
outputs depend on its inputs only), so the checksum does not depend on the
number of calls.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import asdict, dataclass, field
from itertools import product
from pathlib import Path

from mirecc.learn.kernels import pick_families, write_sources

# ---------------------------------------------------------------------------
# types

#: short name -> (C type, is float, fill expression for ordinary data)
TYPES = {
    "i8": ("int8_t", False), "u8": ("uint8_t", False), "i16": ("int16_t", False),
    "u16": ("uint16_t", False), "i32": ("int32_t", False), "u32": ("uint32_t", False),
    "i64": ("int64_t", False), "f32": ("float", True), "f64": ("double", True),
    "u64": ("uint64_t", False),
}


def ctype(t: str) -> str:
    return TYPES[t][0]


def is_float(t: str) -> bool:
    return TYPES[t][1]


def fill(t: str, lo: int = -100, hi: int = 100, positive: bool = False) -> str:
    """C expression for one deterministic input element of type ``t``."""
    if is_float(t):
        if positive:
            return f"({ctype(t)})((double)(lcg() % 100001) / 100000.0)"
        return f"({ctype(t)})((double)(lcg() % 200001) / 100000.0 - 1.0)"
    if t.startswith("u"):
        lo = max(lo, 0)
    return f"({ctype(t)})((long)(lcg() % {hi - lo + 1}) + ({lo}))"


# ---------------------------------------------------------------------------
# the program template

PRELUDE = r"""#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef MIRECC_LOOP_HINT
#define MIRECC_LOOP_HINT
#endif

static uint64_t lcg_state = 0x%(seed)016xULL;
static uint32_t lcg(void) {
  lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (uint32_t)(lcg_state >> 33);
}
static uint64_t fnv = 1469598103934665603ULL;
static void hash_bytes(const void *p, size_t n) {
  const unsigned char *c = (const unsigned char *)p;
  for (size_t i = 0; i < n; i++) { fnv ^= c[i]; fnv *= 1099511628211ULL; }
}
static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}
static void *xalloc(size_t bytes) {
  void *p = NULL;
  if (posix_memalign(&p, 64, bytes ? bytes : 64)) { fprintf(stderr, "out of memory\n"); exit(2); }
  memset(p, 0, bytes);
  return p;
}
#define CLOBBER(p) __asm__ volatile("" : : "r"(p) : "memory")
#define KEEP(x) __asm__ volatile("" : : "m"(x) : "memory")
"""

MAIN = r"""
int main(int argc, char **argv) {
%(args)s
  const char *env_reps = getenv("MIRECC_REPS");
  const char *env_target = getenv("MIRECC_TARGET_NS");
  long reps = env_reps ? atol(env_reps) : 0;
  double target = env_target ? atof(env_target) : 15e6;
%(setup)s
#define CALL() do { %(call)s } while (0)
  CALL();  /* warm-up */
  if (reps <= 0) {
    long r = 1;
    for (;;) {
      double t0 = now_ns();
      for (long rep_ = 0; rep_ < r; rep_++) CALL();
      double el = now_ns() - t0;
      if (el >= target || r >= (1L << 40)) { reps = r; printf("reps %%ld\ntime_ns %%.1f\n", r, el / r); break; }
      long next = el > 0 ? (long)(r * (target / el) * 1.1) + 1 : r * 16;
      if (next > r * 16) next = r * 16;
      if (next <= r) next = r + 1;
      r = next;
    }
  } else {
    double t0 = now_ns();
    for (long rep_ = 0; rep_ < reps; rep_++) CALL();
    double el = now_ns() - t0;
    printf("reps %%ld\ntime_ns %%.1f\n", reps, el / reps);
  }
  double value = 0;
%(check)s
  printf("checksum %%016llx\nvalue %%.17g\n", (unsigned long long)fnv, value);
  return 0;
}
"""


@dataclass
class Kernel:
    """One generated program."""
    name: str
    family: str
    params: dict
    args: list[str]
    needs_reassoc: bool = False
    source: str = ""
    target_line: int = 0
    notes: str = ""
    extra: dict = field(default_factory=dict)

    def record(self) -> dict:
        d = asdict(self)
        d.pop("source")
        d["source_sha256"] = hashlib.sha256(self.source.encode()).hexdigest()
        d["file"] = f"{self.name}.c"
        return d


def _arr_out(var: str, t: str, count: str) -> str:
    """check code for an output array."""
    return (f"  hash_bytes({var}, (size_t)({count}) * sizeof({ctype(t)}));\n"
            f"  for (long q = 0; q < (long)({count}); q++) value += (double){var}[q];\n")


def _scalar_out(var: str, t: str) -> str:
    return f"  hash_bytes(&{var}, sizeof({var}));\n  value = (double){var};\n"


def build(name: str, family: str, params: dict, args: list[str], *, kernel: str,
          setup: str, call: str, check: str, argdecl: str, seed: int,
          needs_reassoc: bool = False, defines: str = "", notes: str = "") -> Kernel:
    src = (PRELUDE % {"seed": seed & 0xFFFFFFFFFFFFFFFF}) + defines + "\n" + kernel.strip("\n") \
        + "\n" + MAIN % {"args": argdecl, "setup": setup, "call": call, "check": check}
    lines = src.split("\n")
    hint = [i for i, ln in enumerate(lines) if ln.strip() == "MIRECC_LOOP_HINT"]
    assert len(hint) == 1, name
    return Kernel(name=name, family=family, params=params, args=args,
                  needs_reassoc=needs_reassoc, source=src, target_line=hint[0] + 2, notes=notes)


def _argdecl(names: list[str]) -> str:
    out = []
    for i, nm in enumerate(names):
        out.append(f"  long {nm} = argc > {i + 1} ? atol(argv[{i + 1}]) : 1000;")
    return "\n".join(out)


def _alloc(var: str, t: str, count: str, expr: str | None) -> str:
    s = f"  {ctype(t)} *{var} = ({ctype(t)} *)xalloc((size_t)({count}) * sizeof({ctype(t)}));\n"
    if expr:
        s += f"  for (long q = 0; q < (long)({count}); q++) {var}[q] = {expr};\n"
    return s


SIZES = {"l1": 1000, "l2": 24000, "l3": 400000, "mem": 2000000}


def _size(rng: random.Random, tag: str) -> int:
    base = SIZES[tag]
    return base + rng.randrange(0, 17)   # a non-multiple of every VF, sometimes


# ---------------------------------------------------------------------------
# families: each is f(rng, seed) -> list of Kernel (all variants; the caller
# picks per_family of them)


def fam_elementwise(rng, seed):
    out = []
    ops = {"muladd": "b[i] * c[i] + d", "add": "b[i] + c[i]", "mulsub": "b[i] * c[i] - b[i]",
           "minmax": "(b[i] < c[i] ? b[i] : c[i]) + d"}
    for t, op, sz in product(["i8", "i16", "i32", "i64", "f32", "f64"], list(ops), ["l1", "l2"]):
        T = ctype(t)
        n = _size(rng, sz)
        k = f"""__attribute__((noinline)) void kernel({T} *restrict a, const {T} *restrict b,
                                        const {T} *restrict c, {T} d, long n) {{
  MIRECC_LOOP_HINT
  for (long i = 0; i < n; i++)
    a[i] = ({T})({ops[op]});
}}"""
        setup = _alloc("a", t, "n", None) + _alloc("b", t, "n", fill(t, -10, 10)) \
            + _alloc("c", t, "n", fill(t, -10, 10)) + f"  {T} d = ({T})3;\n"
        out.append(build(f"elementwise-{t}-{op}-{sz}", "elementwise",
                         {"type": t, "op": op, "size": sz, "n": n}, [str(n)], kernel=k,
                         setup=setup, call="kernel(a, b, c, d, n); CLOBBER(a);",
                         check=_arr_out("a", t, "n"), argdecl=_argdecl(["n"]), seed=seed))
    return out


def fam_saxpy(rng, seed):
    out = []
    for t, sz, alias in product(["f32", "f64", "i32", "i64", "i16"], ["l1", "l2", "l3"],
                                ["restrict", "alias"]):
        T = ctype(t)
        n = _size(rng, sz)
        r = "restrict " if alias == "restrict" else ""
        k = f"""__attribute__((noinline)) void kernel({T} *{r}z, const {T} *{r}x, const {T} *{r}y,
                                        {T} alpha, long n) {{
  MIRECC_LOOP_HINT
  for (long i = 0; i < n; i++)
    z[i] = alpha * x[i] + y[i];
}}"""
        setup = _alloc("z", t, "n", None) + _alloc("x", t, "n", fill(t)) \
            + _alloc("y", t, "n", fill(t)) + f"  {T} alpha = ({T})3;\n"
        out.append(build(f"saxpy-{t}-{sz}-{alias}", "saxpy",
                         {"type": t, "size": sz, "n": n, "restrict": alias == "restrict"},
                         [str(n)], kernel=k, setup=setup,
                         call="kernel(z, x, y, alpha, n); CLOBBER(z);",
                         check=_arr_out("z", t, "n"), argdecl=_argdecl(["n"]), seed=seed,
                         notes="without restrict the vectorizer needs runtime alias checks"))
    return out


def fam_reduce_int(rng, seed):
    out = []
    accs = {"i8": "i32", "u8": "u32", "i16": "i32", "i32": "i32", "u32": "u32", "i64": "i64"}
    for t, op, sz in product(list(accs), ["sum", "max", "min", "xor"], ["l1", "l2", "l3"]):
        T, A = ctype(t), ctype(accs[t] if op in ("sum", "xor") else t)
        n = _size(rng, sz)
        init = {"sum": "0", "xor": "0", "max": "b[0]", "min": "b[0]"}[op]
        body = {"sum": "s += b[i];", "xor": "s ^= b[i];", "max": "s = b[i] > s ? b[i] : s;",
                "min": "s = b[i] < s ? b[i] : s;"}[op]
        k = f"""__attribute__((noinline)) {A} kernel(const {T} *restrict b, long n) {{
  {A} s = {init};
  MIRECC_LOOP_HINT
  for (long i = 0; i < n; i++)
    {body}
  return s;
}}"""
        setup = _alloc("b", t, "n", fill(t, -100, 100)) + f"  {A} res = 0;\n"
        out.append(build(f"reduce_int-{t}-{op}-{sz}", "reduce_int",
                         {"type": t, "acc": accs[t], "op": op, "size": sz, "n": n}, [str(n)],
                         kernel=k, setup=setup, call="res = kernel(b, n); KEEP(res);",
                         check=_scalar_out("res", t), argdecl=_argdecl(["n"]), seed=seed))
    return out


def fam_reduce_float(rng, seed):
    out = []
    for t, op, sz in product(["f32", "f64"], ["sum", "dot", "sumsq", "max"], ["l1", "l2", "l3"]):
        T = ctype(t)
        n = _size(rng, sz)
        body = {"sum": "s += b[i];", "dot": "s += b[i] * c[i];", "sumsq": "s += b[i] * b[i];",
                "max": "s = b[i] > s ? b[i] : s;"}[op]
        k = f"""__attribute__((noinline)) {T} kernel(const {T} *restrict b, const {T} *restrict c, long n) {{
  {T} s = 0;
  MIRECC_LOOP_HINT
  for (long i = 0; i < n; i++)
    {body}
  return s;
}}"""
        setup = _alloc("b", t, "n", fill(t, positive=True)) + _alloc("c", t, "n", fill(t, positive=True)) \
            + f"  {T} res = 0;\n"
        out.append(build(f"reduce_float-{t}-{op}-{sz}", "reduce_float",
                         {"type": t, "op": op, "size": sz, "n": n}, [str(n)], kernel=k,
                         setup=setup, call="res = kernel(b, c, n); KEEP(res);",
                         check=_scalar_out("res", t), argdecl=_argdecl(["n"]), seed=seed,
                         needs_reassoc=op != "max",
                         notes="in-order FP reduction: vectorizing reassociates"))
    return out


def fam_strided(rng, seed):
    out = []
    for t, stride, kind, sz in product(["i32", "f32", "f64", "i16"], [2, 3, 4], ["load", "store"],
                                       ["l1", "l2"]):
        T = ctype(t)
        n = _size(rng, sz)
        stmt = (f"a[i] = b[{stride} * i] * k + b[{stride} * i + 1];" if kind == "load"
                else f"a[{stride} * i] = b[i] * k; a[{stride} * i + 1] = b[i] + k;")
        k = f"""__attribute__((noinline)) void kernel({T} *restrict a, const {T} *restrict b, {T} k, long n) {{
  MIRECC_LOOP_HINT
  for (long i = 0; i < n; i++) {{
    {stmt}
  }}
}}"""
        na = "n" if kind == "load" else f"{stride} * n + 1"
        nb = f"{stride} * n + 1" if kind == "load" else "n"
        setup = _alloc("a", t, na, None) + _alloc("b", t, nb, fill(t, -10, 10)) + f"  {T} k = ({T})3;\n"
        out.append(build(f"strided-{t}-s{stride}-{kind}-{sz}", "strided",
                         {"type": t, "stride": stride, "kind": kind, "size": sz, "n": n},
                         [str(n)], kernel=k, setup=setup, call="kernel(a, b, k, n); CLOBBER(a);",
                         check=_arr_out("a", t, na), argdecl=_argdecl(["n"]), seed=seed))
    return out


def fam_gather(rng, seed):
    out = []
    for t, it, sz, pat in product(["i32", "f32", "f64", "i64"], ["i32", "i64"], ["l1", "l2", "l3"],
                                  ["random", "local"]):
        T, I = ctype(t), ctype(it)
        n = _size(rng, sz)
        idx = "(lcg() % (uint32_t)m)" if pat == "random" else "((q + (long)(lcg() % 8)) % m)"
        k = f"""__attribute__((noinline)) void kernel({T} *restrict a, const {T} *restrict b,
                                        const {I} *restrict idx, const {T} *restrict c, long n) {{
  MIRECC_LOOP_HINT
  for (long i = 0; i < n; i++)
    a[i] = b[idx[i]] + c[i];
}}"""
        setup = ("  long m = n;\n" + _alloc("a", t, "n", None) + _alloc("b", t, "m", fill(t))
                 + _alloc("idx", it, "n", f"({I}){idx}") + _alloc("c", t, "n", fill(t)))
        out.append(build(f"gather-{t}-idx{it[1:]}-{sz}-{pat}", "gather",
                         {"type": t, "index": it, "size": sz, "n": n, "pattern": pat}, [str(n)],
                         kernel=k, setup=setup, call="kernel(a, b, idx, c, n); CLOBBER(a);",
                         check=_arr_out("a", t, "n"), argdecl=_argdecl(["n"]), seed=seed))
    return out


def fam_stencil1d(rng, seed):
    out = []
    for t, sz, pts in product(["f32", "f64", "i32", "i16"], ["l1", "l2", "l3"], [3, 5]):
        T = ctype(t)
        n = _size(rng, sz)
        r = pts // 2
        terms = " + ".join(f"({T})({w}) * b[i + ({o})]" for w, o in
                           zip([1, 2, 3, 2, 1][:pts] if pts == 5 else [1, 2, 1], range(-r, r + 1)))
        k = f"""__attribute__((noinline)) void kernel({T} *restrict a, const {T} *restrict b, long n) {{
  MIRECC_LOOP_HINT
  for (long i = {r}; i < n - {r}; i++)
    a[i] = {terms};
}}"""
        setup = _alloc("a", t, "n", None) + _alloc("b", t, "n", fill(t, -50, 50))
        out.append(build(f"stencil1d-{t}-p{pts}-{sz}", "stencil1d",
                         {"type": t, "points": pts, "size": sz, "n": n}, [str(n)], kernel=k,
                         setup=setup, call="kernel(a, b, n); CLOBBER(a);",
                         check=_arr_out("a", t, "n"), argdecl=_argdecl(["n"]), seed=seed))
    return out


def fam_stencil2d(rng, seed):
    out = []
    shapes = [(64, 64), (128, 100), (300, 301), (1000, 40), (40, 1000), (512, 512)]
    for t, (rows, cols) in product(["f32", "f64", "i32", "i16"], shapes):
        T = ctype(t)
        k = f"""__attribute__((noinline)) void kernel({T} *restrict a, const {T} *restrict b, long rows, long cols) {{
  for (long r = 1; r < rows - 1; r++) {{
    MIRECC_LOOP_HINT
    for (long c = 1; c < cols - 1; c++)
      a[r * cols + c] = b[r * cols + c] * ({T})4 - b[(r - 1) * cols + c] - b[(r + 1) * cols + c]
                        - b[r * cols + c - 1] - b[r * cols + c + 1];
  }}
}}"""
        setup = _alloc("a", t, "rows * cols", None) + _alloc("b", t, "rows * cols", fill(t, -50, 50))
        out.append(build(f"stencil2d-{t}-{rows}x{cols}", "stencil2d",
                         {"type": t, "rows": rows, "cols": cols}, [str(rows), str(cols)], kernel=k,
                         setup=setup, call="kernel(a, b, rows, cols); CLOBBER(a);",
                         check=_arr_out("a", t, "rows * cols"), argdecl=_argdecl(["rows", "cols"]),
                         seed=seed))
    return out


def fam_cond(rng, seed):
    out = []
    kinds = {
        "ifelse": "if (b[i] > t) a[i] = b[i] * 2; else a[i] = c[i];",
        "select": "a[i] = b[i] > t ? b[i] : c[i] + 1;",
        "condstore": "if (b[i] > t) a[i] = c[i];",
        "condload": "a[i] = b[i] > t ? c[i] * b[i] : 0;",
    }
    for t, kind, sz, sel in product(["i32", "f32", "f64", "i16", "i8"], list(kinds), ["l1", "l2"],
                                    ["half", "rare"]):
        T = ctype(t)
        n = _size(rng, sz)
        thr = "0" if sel == "half" else "90"
        k = f"""__attribute__((noinline)) void kernel({T} *restrict a, const {T} *restrict b,
                                        const {T} *restrict c, {T} t, long n) {{
  MIRECC_LOOP_HINT
  for (long i = 0; i < n; i++) {{
    {kinds[kind]}
  }}
}}"""
        bf = fill(t, -100, 100) if not is_float(t) else f"({T})((long)(lcg() % 201) - 100)"
        setup = _alloc("a", t, "n", "0") + _alloc("b", t, "n", bf) + _alloc("c", t, "n", fill(t, -10, 10)) \
            + f"  {T} t = ({T}){thr};\n"
        out.append(build(f"cond-{t}-{kind}-{sz}-{sel}", "cond",
                         {"type": t, "kind": kind, "size": sz, "n": n, "selectivity": sel},
                         [str(n)], kernel=k, setup=setup, call="kernel(a, b, c, t, n); CLOBBER(a);",
                         check=_arr_out("a", t, "n"), argdecl=_argdecl(["n"]), seed=seed))
    return out


def fam_convert(rng, seed):
    out = []
    convs = [("u8", "i32"), ("i8", "i32"), ("u8", "u16"), ("i16", "i64"), ("i32", "i16"),
             ("i32", "i8"), ("i64", "i32"), ("i32", "f32"), ("f32", "i32"), ("f32", "f64"),
             ("f64", "f32"), ("u16", "f32")]
    for (src, dst), sz, op in product(convs, ["l1", "l2"], ["scale", "plain"]):
        S, D = ctype(src), ctype(dst)
        n = _size(rng, sz)
        expr = f"({D})b[i]" if op == "plain" else f"({D})b[i] * ({D})3 + ({D})1"
        k = f"""__attribute__((noinline)) void kernel({D} *restrict a, const {S} *restrict b, long n) {{
  MIRECC_LOOP_HINT
  for (long i = 0; i < n; i++)
    a[i] = {expr};
}}"""
        setup = _alloc("a", dst, "n", None) + _alloc("b", src, "n", fill(src, -100, 100))
        out.append(build(f"convert-{src}to{dst}-{op}-{sz}", "convert",
                         {"src": src, "dst": dst, "op": op, "size": sz, "n": n}, [str(n)],
                         kernel=k, setup=setup, call="kernel(a, b, n); CLOBBER(a);",
                         check=_arr_out("a", dst, "n"), argdecl=_argdecl(["n"]), seed=seed))
    return out


def fam_short_trip(rng, seed):
    out = []
    for t, n, const in product(["f32", "i32", "i16", "f64"], [3, 5, 7, 8, 12, 16, 17, 24, 33],
                               [False, True]):
        T = ctype(t)
        rows = 20000 // n + 1
        bound = "N" if const else "n"
        k = f"""__attribute__((noinline)) void kernel({T} *restrict a, const {T} *restrict b,
                                        const {T} *restrict c, long rows, long n) {{
  (void)n;
  for (long r = 0; r < rows; r++) {{
    MIRECC_LOOP_HINT
    for (long i = 0; i < {bound}; i++)
      a[r * {bound} + i] = b[r * {bound} + i] * c[i] + ({T})1;
  }}
}}"""
        setup = _alloc("a", t, "rows * n", None) + _alloc("b", t, "rows * n", fill(t, -10, 10)) \
            + _alloc("c", t, "n", fill(t, -10, 10))
        defines = f"#define N {n}L\n" if const else ""
        out.append(build(f"short_trip-{t}-n{n}-{'const' if const else 'var'}", "short_trip",
                         {"type": t, "n": n, "rows": rows, "const_trip": const},
                         [str(rows), str(n)], kernel=k, setup=setup,
                         call="kernel(a, b, c, rows, n); CLOBBER(a);",
                         check=_arr_out("a", t, "rows * n"), argdecl=_argdecl(["rows", "n"]),
                         seed=seed, defines=defines))
    return out


def fam_triad(rng, seed):
    """Long trip counts: L1 / L2 / L3 / memory-sized arrays."""
    out = []
    for t, sz, ops in product(["f32", "f64", "i32", "i64", "i8"], ["l1", "l2", "l3", "mem"],
                              ["triad", "copy_scale"]):
        T = ctype(t)
        n = _size(rng, sz)
        stmt = "a[i] = b[i] + s * c[i];" if ops == "triad" else "a[i] = s * b[i];"
        k = f"""__attribute__((noinline)) void kernel({T} *restrict a, const {T} *restrict b,
                                        const {T} *restrict c, {T} s, long n) {{
  MIRECC_LOOP_HINT
  for (long i = 0; i < n; i++)
    {stmt}
}}"""
        setup = _alloc("a", t, "n", None) + _alloc("b", t, "n", fill(t, -10, 10)) \
            + _alloc("c", t, "n", fill(t, -10, 10)) + f"  {T} s = ({T})3;\n"
        out.append(build(f"triad-{t}-{ops}-{sz}", "triad",
                         {"type": t, "op": ops, "size": sz, "n": n}, [str(n)], kernel=k,
                         setup=setup, call="kernel(a, b, c, s, n); CLOBBER(a);",
                         check=_arr_out("a", t, "n"), argdecl=_argdecl(["n"]), seed=seed))
    return out


def fam_nested(rng, seed):
    out = []
    for t, (m, kk, nn), kind in product(["f32", "f64", "i32", "i16"],
                                        [(32, 32, 32), (48, 40, 64), (16, 128, 100), (64, 16, 13)],
                                        ["matmul", "rowsum"]):
        T = ctype(t)
        if kind == "matmul":
            k = f"""__attribute__((noinline)) void kernel({T} *restrict c, const {T} *restrict a,
                                        const {T} *restrict b, long M, long K, long N) {{
  for (long i = 0; i < M; i++) {{
    for (long j = 0; j < N; j++) c[i * N + j] = 0;
    for (long k = 0; k < K; k++) {{
      {T} aik = a[i * K + k];
      MIRECC_LOOP_HINT
      for (long j = 0; j < N; j++)
        c[i * N + j] += aik * b[k * N + j];
    }}
  }}
}}"""
            outsz = "M * N"
        else:
            k = f"""__attribute__((noinline)) void kernel({T} *restrict c, const {T} *restrict a,
                                        const {T} *restrict b, long M, long K, long N) {{
  (void)K;
  for (long i = 0; i < M; i++) {{
    MIRECC_LOOP_HINT
    for (long j = 0; j < N; j++)
      c[i * N + j] = a[i * N + j] * b[j] + a[i * N + j];
  }}
}}"""
            outsz = "M * N"
        setup = _alloc("c", t, "M * N", None) + _alloc("a", t, "M * (K > N ? K : N)", fill(t, -5, 5)) \
            + _alloc("b", t, "K * N", fill(t, -5, 5))
        out.append(build(f"nested-{t}-{kind}-{m}x{kk}x{nn}", "nested",
                         {"type": t, "kind": kind, "M": m, "K": kk, "N": nn},
                         [str(m), str(kk), str(nn)], kernel=k, setup=setup,
                         call="kernel(c, a, b, M, K, N); CLOBBER(c);",
                         check=_arr_out("c", t, outsz), argdecl=_argdecl(["M", "K", "N"]),
                         seed=seed))
    return out


def fam_dependence(rng, seed):
    """Loop-carried dependences: the target loop is (mostly) not vectorizable."""
    out = []
    for t, kind, sz in product(["i32", "f32", "f64", "i64", "u8"],
                               ["prefix", "rec1", "rec2", "rec4", "rec8", "rec_var"], ["l1", "l2"]):
        T = ctype(t)
        n = _size(rng, sz)
        if kind == "prefix":
            body = "a[i] = a[i - 1] + b[i];"
            first = "1"
        else:
            d = {"rec1": "1", "rec2": "2", "rec4": "4", "rec8": "8", "rec_var": "dist"}[kind]
            body = f"a[i] = a[i - {d}] * k + b[i];"
            first = d
        k = f"""__attribute__((noinline)) void kernel({T} *restrict a, const {T} *restrict b, {T} k, long dist, long n) {{
  (void)k; (void)dist;
  for (long i = 0; i < {first}; i++) a[i] = b[i];
  MIRECC_LOOP_HINT
  for (long i = {first}; i < n; i++)
    {body}
}}"""
        kv = "(" + T + ")1" if not is_float(t) else f"({T})0.5"
        setup = _alloc("a", t, "n", None) + _alloc("b", t, "n", fill(t, -5, 5)) \
            + f"  {T} k = {kv};\n  long dist = 3;\n"
        out.append(build(f"dependence-{t}-{kind}-{sz}", "dependence",
                         {"type": t, "kind": kind, "size": sz, "n": n}, [str(n)], kernel=k,
                         setup=setup, call="kernel(a, b, k, dist, n); CLOBBER(a);",
                         check=_arr_out("a", t, "n"), argdecl=_argdecl(["n"]), seed=seed,
                         notes="loop-carried dependence; forcing a width must not change output"))
    return out


def fam_mac(rng, seed):
    """Integer multiply-accumulate (dot products with widening)."""
    out = []
    combos = [("i16", "i32"), ("i8", "i32"), ("u8", "i32"), ("i32", "i64"), ("i32", "i32"),
              ("i16", "i64"), ("u16", "u32")]
    for (t, acc), sz, form in product(combos, ["l1", "l2", "l3"], ["dot", "axpydot"]):
        T, A = ctype(t), ctype(acc)
        n = _size(rng, sz)
        expr = "(A)b[i] * (A)c[i]" if form == "dot" else "(A)b[i] * (A)c[i] + (A)b[i] * (A)3"
        expr = expr.replace("(A)", f"({A})")
        k = f"""__attribute__((noinline)) {A} kernel(const {T} *restrict b, const {T} *restrict c, long n) {{
  {A} s = 0;
  MIRECC_LOOP_HINT
  for (long i = 0; i < n; i++)
    s += {expr};
  return s;
}}"""
        setup = _alloc("b", t, "n", fill(t, -100, 100)) + _alloc("c", t, "n", fill(t, -100, 100)) \
            + f"  {A} res = 0;\n"
        out.append(build(f"mac-{t}to{acc}-{form}-{sz}", "mac",
                         {"type": t, "acc": acc, "form": form, "size": sz, "n": n}, [str(n)],
                         kernel=k, setup=setup, call="res = kernel(b, c, n); KEEP(res);",
                         check=_scalar_out("res", acc), argdecl=_argdecl(["n"]), seed=seed))
    return out


def fam_divmod(rng, seed):
    out = []
    for t, kind, sz in product(["i32", "u32", "i64", "i16", "u8"],
                               ["div_var", "mod_var", "div_const", "mod_const", "div_pow2"],
                               ["l1", "l2"]):
        T = ctype(t)
        n = _size(rng, sz)
        expr = {"div_var": "b[i] / c[i]", "mod_var": "b[i] % c[i]", "div_const": "b[i] / 7",
                "mod_const": "b[i] % 13", "div_pow2": "b[i] / 8"}[kind]
        k = f"""__attribute__((noinline)) void kernel({T} *restrict a, const {T} *restrict b,
                                        const {T} *restrict c, long n) {{
  MIRECC_LOOP_HINT
  for (long i = 0; i < n; i++)
    a[i] = ({T})({expr});
}}"""
        setup = _alloc("a", t, "n", None) + _alloc("b", t, "n", fill(t, -100, 100)) \
            + _alloc("c", t, "n", fill(t, 1, 50))
        out.append(build(f"divmod-{t}-{kind}-{sz}", "divmod",
                         {"type": t, "kind": kind, "size": sz, "n": n}, [str(n)], kernel=k,
                         setup=setup, call="kernel(a, b, c, n); CLOBBER(a);",
                         check=_arr_out("a", t, "n"), argdecl=_argdecl(["n"]), seed=seed))
    return out


def fam_prefix(rng, seed):
    """Scans (prefix sums) and running maxima: loop-carried, usually not vectorized."""
    out = []
    kinds = {
        "inclusive": "s += b[i];\n    a[i] = s;",
        "exclusive": "a[i] = s;\n    s += b[i];",
        "runmax": "s = b[i] > s ? b[i] : s;\n    a[i] = s;",
        "weighted_mem": "a[i] = a[i - 1] + b[i] * w;",
    }
    for t, kind, sz in product(["i32", "i64", "f32", "f64"], list(kinds), ["l1", "l2", "l3"]):
        T = ctype(t)
        n = _size(rng, sz)
        init = "b[0]" if kind == "runmax" else "0"
        start = "1" if kind == "weighted_mem" else "0"
        k = f"""__attribute__((noinline)) void kernel({T} *restrict a, const {T} *restrict b, {T} w, long n) {{
  {T} s = {init};
  (void)w; (void)s;
  a[0] = b[0];
  MIRECC_LOOP_HINT
  for (long i = {start}; i < n; i++) {{
    {kinds[kind]}
  }}
}}"""
        wv = f"({T})3" if not is_float(t) else f"({T})0.5"
        setup = _alloc("a", t, "n", None) + _alloc("b", t, "n", fill(t, -100, 100)) \
            + f"  {T} w = {wv};\n"
        out.append(build(f"prefix-{t}-{kind}-{sz}", "prefix",
                         {"type": t, "kind": kind, "size": sz, "n": n}, [str(n)], kernel=k,
                         setup=setup, call="kernel(a, b, w, n); CLOBBER(a);",
                         check=_arr_out("a", t, "n"), argdecl=_argdecl(["n"]), seed=seed,
                         notes="scan: every partial result is stored, so it is not a reduction; "
                         "forcing a width must not change output"))
    return out


def fam_complex(rng, seed):
    """Interleaved complex numbers (re, im pairs in one array): stride-2 access."""
    out = []
    ops = {
        "mul": ("z[2 * i] = xr * yr - xi * yi;\n    z[2 * i + 1] = xr * yi + xi * yr;", 2),
        "conjmul": ("z[2 * i] = xr * yr + xi * yi;\n    z[2 * i + 1] = xi * yr - xr * yi;", 2),
        "axpy": ("z[2 * i] = wr * xr - wi * xi + yr;\n    z[2 * i + 1] = wr * xi + wi * xr + yi;", 2),
        "conj": ("z[2 * i] = xr;\n    z[2 * i + 1] = -xi;\n    (void)yr; (void)yi;", 2),
        "magsq": ("z[i] = xr * xr + xi * xi;\n    (void)yr; (void)yi;", 1),
    }
    for t, op, sz in product(["f32", "f64", "i32"], list(ops), ["l1", "l2"]):
        T = ctype(t)
        n = _size(rng, sz)
        stmt, per = ops[op]
        k = f"""__attribute__((noinline)) void kernel({T} *restrict z, const {T} *restrict x,
                                        const {T} *restrict y, {T} wr, {T} wi, long n) {{
  (void)wr; (void)wi;
  MIRECC_LOOP_HINT
  for (long i = 0; i < n; i++) {{
    {T} xr = x[2 * i], xi = x[2 * i + 1], yr = y[2 * i], yi = y[2 * i + 1];
    {stmt}
  }}
}}"""
        nz = "2 * n" if per == 2 else "n"
        wv = ("(" + T + ")2", "(" + T + ")-3") if not is_float(t) else (f"({T})0.75", f"({T})-0.5")
        setup = _alloc("z", t, nz, None) + _alloc("x", t, "2 * n", fill(t, -100, 100)) \
            + _alloc("y", t, "2 * n", fill(t, -100, 100)) + f"  {T} wr = {wv[0]}, wi = {wv[1]};\n"
        out.append(build(f"complex-{t}-{op}-{sz}", "complex",
                         {"type": t, "op": op, "size": sz, "n": n}, [str(n)], kernel=k,
                         setup=setup, call="kernel(z, x, y, wr, wi, n); CLOBBER(z);",
                         check=_arr_out("z", t, nz), argdecl=_argdecl(["n"]), seed=seed))
    return out


def fam_sad(rng, seed):
    """Video-codec style narrow-integer kernels: SAD with a widening accumulator,
    absolute difference, saturating add, rounding average."""
    out = []
    accs = {"u8": "u32", "i8": "i32", "i16": "i32", "u16": "u32"}
    unsigned = {"u8": "u8", "i8": "u8", "i16": "u16", "u16": "u16"}
    limits = {"u8": (0, 255), "i8": (-128, 127), "i16": (-32768, 32767), "u16": (0, 65535)}
    narrow = {"u8": (0, 255), "i8": (-128, 127), "i16": (-2048, 2047), "u16": (0, 4095)}
    for t, kind, sz in product(list(accs), ["sad", "absdiff", "satadd", "avg"], ["l1", "l2", "l3"]):
        T = ctype(t)
        n = _size(rng, sz)
        lo, hi = limits[t]
        if kind == "sad":
            A = ctype(accs[t])
            k = f"""__attribute__((noinline)) {A} kernel(const {T} *restrict b, const {T} *restrict c, long n) {{
  {A} s = 0;
  MIRECC_LOOP_HINT
  for (long i = 0; i < n; i++) {{
    int d = (int)b[i] - (int)c[i];
    s += ({A})(d < 0 ? -d : d);
  }}
  return s;
}}"""
            flo, fhi = narrow[t]
            setup = _alloc("b", t, "n", fill(t, flo, fhi)) + _alloc("c", t, "n", fill(t, flo, fhi)) \
                + f"  {A} res = 0;\n"
            call, check, ot = "res = kernel(b, c, n); KEEP(res);", _scalar_out("res", accs[t]), accs[t]
        else:
            ot = unsigned[t] if kind == "absdiff" else t
            O = ctype(ot)
            expr = {"absdiff": f"({O})(d < 0 ? -d : d)",
                    "satadd": f"({O})(v < ({lo}) ? ({lo}) : v > ({hi}) ? ({hi}) : v)",
                    "avg": f"({O})((v + 1) >> 1)"}[kind]
            pre = "int d = (int)b[i] - (int)c[i];" if kind == "absdiff" else "int v = (int)b[i] + (int)c[i];"
            k = f"""__attribute__((noinline)) void kernel({O} *restrict a, const {T} *restrict b,
                                        const {T} *restrict c, long n) {{
  MIRECC_LOOP_HINT
  for (long i = 0; i < n; i++) {{
    {pre}
    a[i] = {expr};
  }}
}}"""
            setup = _alloc("a", ot, "n", None) + _alloc("b", t, "n", fill(t, lo, hi)) \
                + _alloc("c", t, "n", fill(t, lo, hi))
            call, check = "kernel(a, b, c, n); CLOBBER(a);", _arr_out("a", ot, "n")
        out.append(build(f"sad-{t}-{kind}-{sz}", "sad",
                         {"type": t, "out": ot, "kind": kind, "size": sz, "n": n}, [str(n)],
                         kernel=k, setup=setup, call=call, check=check, argdecl=_argdecl(["n"]),
                         seed=seed))
    return out


def fam_poly(rng, seed):
    """Compute-bound element-wise kernels: a polynomial per element (Horner)."""
    out = []
    for t, deg, form, sz in product(["f32", "f64", "i32"], [3, 5, 7, 9], ["const", "param"],
                                    ["l1", "l2"]):
        T = ctype(t)
        n = _size(rng, sz)
        coefs = [(j * 7) % 9 - 4 for j in range(deg + 1)]
        if is_float(t):
            cs = [f"({T})({c * 0.25})" for c in coefs]
        else:
            cs = [f"({T})({c})" for c in coefs]
        if form == "param":
            cs = [f"p[{j}]" for j in range(deg + 1)]
        expr = cs[deg]
        for j in range(deg - 1, -1, -1):
            expr = f"({expr}) * x + {cs[j]}" if j < deg - 1 else f"{expr} * x + {cs[j]}"
        k = f"""__attribute__((noinline)) void kernel({T} *restrict a, const {T} *restrict b,
                                        const {T} *restrict p, long n) {{
  (void)p;
  MIRECC_LOOP_HINT
  for (long i = 0; i < n; i++) {{
    {T} x = b[i];
    a[i] = {expr};
  }}
}}"""
        pexpr = " ".join(f"p[{j}] = {c};" for j, c in enumerate(
            [f"({T})({c * 0.25})" if is_float(t) else f"({T})({c})" for c in coefs]))
        bf = fill(t) if is_float(t) else fill(t, -3, 3)
        setup = _alloc("a", t, "n", None) + _alloc("b", t, "n", bf) + _alloc("p", t, str(deg + 1), None) \
            + f"  {pexpr}\n"
        out.append(build(f"poly-{t}-d{deg}-{form}-{sz}", "poly",
                         {"type": t, "degree": deg, "form": form, "size": sz, "n": n}, [str(n)],
                         kernel=k, setup=setup, call="kernel(a, b, p, n); CLOBBER(a);",
                         check=_arr_out("a", t, "n"), argdecl=_argdecl(["n"]), seed=seed))
    return out


def fam_matvec(rng, seed):
    """Row-major matrix-vector products: y = A x (inner loop: a reduction over a
    row) and y = A^T x (inner loop: an axpy over y)."""
    out = []
    shapes = [(64, 64), (100, 300), (256, 256), (1000, 40), (40, 1000), (500, 17)]
    for t, kind, (m, nn) in product(["f32", "f64", "i32"], ["rows", "cols"], shapes):
        T = ctype(t)
        if kind == "rows":
            k = f"""__attribute__((noinline)) void kernel({T} *restrict y, const {T} *restrict A,
                                        const {T} *restrict x, long M, long N) {{
  for (long i = 0; i < M; i++) {{
    {T} s = 0;
    MIRECC_LOOP_HINT
    for (long j = 0; j < N; j++)
      s += A[i * N + j] * x[j];
    y[i] = s;
  }}
}}"""
            ny, nx = "M", "N"
        else:
            k = f"""__attribute__((noinline)) void kernel({T} *restrict y, const {T} *restrict A,
                                        const {T} *restrict x, long M, long N) {{
  for (long j = 0; j < N; j++) y[j] = 0;
  for (long i = 0; i < M; i++) {{
    {T} xi = x[i];
    MIRECC_LOOP_HINT
    for (long j = 0; j < N; j++)
      y[j] += A[i * N + j] * xi;
  }}
}}"""
            ny, nx = "N", "M"
        f = fill(t, -10, 10)
        setup = _alloc("y", t, ny, None) + _alloc("A", t, "M * N", f) + _alloc("x", t, nx, f)
        out.append(build(f"matvec-{t}-{kind}-{m}x{nn}", "matvec",
                         {"type": t, "kind": kind, "M": m, "N": nn}, [str(m), str(nn)],
                         kernel=k, setup=setup, call="kernel(y, A, x, M, N); CLOBBER(y);",
                         check=_arr_out("y", t, ny), argdecl=_argdecl(["M", "N"]), seed=seed,
                         needs_reassoc=is_float(t) and kind == "rows",
                         notes="rows: in-order FP reduction per row; vectorizing reassociates"
                         if kind == "rows" else ""))
    return out


def fam_bitops(rng, seed):
    """Element-wise bit manipulation on unsigned integers."""
    out = []
    width = {"u8": 8, "u16": 16, "u32": 32, "u64": 64}
    mult = {"u8": "0x9DU", "u16": "0x9E37U", "u32": "0x9E3779B1U", "u64": "0x9E3779B97F4A7C15ULL"}
    ops = {
        "shift": "(x << s) ^ (x >> ((s + 3) & (W - 1)))",
        "rotate": "(x << s) | (x >> ((W - s) & (W - 1)))",
        "mask": "((x & (U)c[i]) | (~x & (U)MASK)) ^ ((x >> 1) & (U)MASK)",
        "xorhash": "h * (U)MULT ^ (h >> (W / 3))",
        "hamming": "POPCOUNT(x ^ (U)c[i])",
    }
    for t, op, sz in product(["u8", "u16", "u32", "u64"], list(ops), ["l1", "l2"]):
        T = ctype(t)
        U = "uint64_t" if t == "u64" else "uint32_t"
        W = width[t]
        n = _size(rng, sz)
        expr = (ops[op].replace("(W - 1)", f"{W - 1}").replace("(W / 3)", f"{W // 3}")
                .replace("(W - s)", f"({W} - s)").replace("(U)", f"({U})")
                .replace("MASK", "0x5555555555555555ULL" if t == "u64" else "0x55555555U")
                .replace("MULT", mult[t])
                .replace("POPCOUNT", "__builtin_popcountll" if t == "u64" else "__builtin_popcount"))
        k = f"""__attribute__((noinline)) void kernel({T} *restrict a, const {T} *restrict b,
                                        const {T} *restrict c, long n) {{
  MIRECC_LOOP_HINT
  for (long i = 0; i < n; i++) {{
    {U} x = b[i];
    {U} s = c[i] & {W - 1};
    {U} h = x ^ (x >> {W // 2});
    (void)s; (void)h;
    a[i] = ({T})({expr});
  }}
}}"""
        bf = {"u8": fill(t, 0, 255), "u16": fill(t, 0, 65535), "u32": "(uint32_t)lcg()",
              "u64": "(uint64_t)lcg() * 0x9E3779B97F4A7C15ULL"}[t]
        setup = _alloc("a", t, "n", None) + _alloc("b", t, "n", bf) + _alloc("c", t, "n", bf)
        out.append(build(f"bitops-{t}-{op}-{sz}", "bitops",
                         {"type": t, "op": op, "size": sz, "n": n}, [str(n)], kernel=k,
                         setup=setup, call="kernel(a, b, c, n); CLOBBER(a);",
                         check=_arr_out("a", t, "n"), argdecl=_argdecl(["n"]), seed=seed))
    return out


def fam_copy(rng, seed):
    """Copies, fills, zeroing, reversed and widening copies (memcpy/memset idioms)."""
    out = []
    wider = {"u8": "u16", "i16": "i32", "i32": "i64", "f32": "f64"}
    for t, kind, alias, sz in product(list(wider), ["copy", "fill", "zero", "reverse", "widen"],
                                      ["restrict", "alias"], ["l1", "l2"]):
        if kind in ("fill", "zero") and alias == "alias":
            continue
        T = ctype(t)
        ot = wider[t] if kind == "widen" else t
        O = ctype(ot)
        n = _size(rng, sz)
        r = "restrict " if alias == "restrict" else ""
        stmt = {"copy": "a[i] = b[i];", "fill": "a[i] = v;", "zero": f"a[i] = ({O})0;",
                "reverse": "a[i] = b[n - 1 - i];", "widen": f"a[i] = ({O})b[i];"}[kind]
        k = f"""__attribute__((noinline)) void kernel({O} *{r}a, const {T} *{r}b, {O} v, long n) {{
  (void)b; (void)v;
  MIRECC_LOOP_HINT
  for (long i = 0; i < n; i++)
    {stmt}
}}"""
        setup = _alloc("a", ot, "n", fill(ot, -100, 100)) + _alloc("b", t, "n", fill(t, -100, 100)) \
            + f"  {O} v = ({O})7;\n"
        out.append(build(f"copy-{t}-{kind}-{sz}-{alias}", "copy",
                         {"type": t, "out": ot, "kind": kind, "size": sz, "n": n,
                          "restrict": alias == "restrict"}, [str(n)], kernel=k, setup=setup,
                         call="kernel(a, b, v, n); CLOBBER(a);", check=_arr_out("a", ot, "n"),
                         argdecl=_argdecl(["n"]), seed=seed,
                         notes="copy/zero may become memcpy/memset calls; without restrict "
                         "the vectorizer needs runtime alias checks"))
    return out


def fam_search(rng, seed):
    """Data-dependent scalar results without an early exit: counts, index of the
    maximum / minimum (selects), min and max together."""
    out = []
    kinds = {
        "count": "cnt += b[i] > t;",
        "countrange": "cnt += (b[i] >= lo) & (b[i] < t);",
        "argmax": "if (b[i] > best) { best = b[i]; idx = i; }",
        "argmin": "if (b[i] < best) { best = b[i]; idx = i; }",
        "minmax": "mn = b[i] < mn ? b[i] : mn;\n    mx = b[i] > mx ? b[i] : mx;",
    }
    for t, kind, sz in product(["i32", "i16", "u8", "f32", "f64"], list(kinds), ["l1", "l2", "l3"]):
        T = ctype(t)
        n = _size(rng, sz)
        start, body = ("0" if kind.startswith("count") else "1"), kinds[kind]
        if kind in ("count", "countrange"):
            head = "long cnt = 0;"
            tail = "return cnt;"
        elif kind in ("argmax", "argmin"):
            head = f"{T} best = b[0];\n  long idx = 0;"
            tail = "return idx;"
        else:
            head = f"{T} mn = b[0], mx = b[0];"
            tail = "res[0] = mn;\n  res[1] = mx;\n  return 0;"
        k = f"""__attribute__((noinline)) long kernel({T} *restrict res, const {T} *restrict b, {T} lo, {T} t, long n) {{
  (void)res; (void)lo; (void)t;
  {head}
  MIRECC_LOOP_HINT
  for (long i = {start}; i < n; i++) {{
    {body}
  }}
  {tail}
}}"""
        thr = ("(" + T + ")0.5", "(" + T + ")-0.25") if is_float(t) else \
            ("(" + T + ")50", "(" + T + ")-20") if t != "u8" else ("(uint8_t)200", "(uint8_t)30")
        bf = fill(t, 0, 255) if t == "u8" else fill(t, -1000, 1000) if not is_float(t) else fill(t)
        setup = _alloc("res", t, "2", None) + _alloc("b", t, "n", bf) \
            + f"  {T} t = {thr[0]}, lo = {thr[1]};\n  long idx = 0;\n"
        if kind == "minmax":
            call, check = "idx = kernel(res, b, lo, t, n); CLOBBER(res); KEEP(idx);", _arr_out("res", t, "2")
        else:
            call, check = "idx = kernel(res, b, lo, t, n); KEEP(idx);", _scalar_out("idx", "i64")
        out.append(build(f"search-{t}-{kind}-{sz}", "search",
                         {"type": t, "kind": kind, "size": sz, "n": n}, [str(n)], kernel=k,
                         setup=setup, call=call, check=check, argdecl=_argdecl(["n"]), seed=seed))
    return out


FAMILIES = {
    "elementwise": fam_elementwise, "saxpy": fam_saxpy, "reduce_int": fam_reduce_int,
    "reduce_float": fam_reduce_float, "strided": fam_strided, "gather": fam_gather,
    "stencil1d": fam_stencil1d, "stencil2d": fam_stencil2d, "cond": fam_cond,
    "convert": fam_convert, "short_trip": fam_short_trip, "triad": fam_triad,
    "nested": fam_nested, "dependence": fam_dependence, "mac": fam_mac, "divmod": fam_divmod,
    "prefix": fam_prefix, "complex": fam_complex, "sad": fam_sad, "poly": fam_poly,
    "matvec": fam_matvec, "bitops": fam_bitops, "copy": fam_copy, "search": fam_search,
}

DEFAULT_PER_FAMILY = 12


def _family_seed(seed: int, family: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{family}".encode()).digest()[:8], "little")


def generate(seed: int = 0, per_family: int = DEFAULT_PER_FAMILY,
             families: list[str] | None = None) -> list[Kernel]:
    """``per_family`` kernels of each family (all of them if a family has fewer),
    chosen and sized deterministically from ``seed``."""
    return pick_families(FAMILIES, _family_seed, seed, per_family, families)


def write_kernels(out_dir: Path | str, seed: int = 0, per_family: int = DEFAULT_PER_FAMILY,
                  families: list[str] | None = None) -> list[dict]:
    """Write ``<name>.c`` per kernel and ``index.json``; returns the index records."""
    return write_sources(out_dir, generate(seed, per_family, families),
                         {"seed": seed, "per_family": per_family,
                          "families": families or list(FAMILIES)})
