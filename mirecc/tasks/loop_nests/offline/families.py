"""mirecc's own families of loop-nest benchmark programs, in PolyBench style.

Each program is one C file, built and timed exactly like the PolyBench-ACC
sources (``/work/shared/datasets/polybench-acc/OpenMP``) with the same
harness header and ``polybench.c``::

    clang-14 -O3 [flags] -D<SIZE>_DATASET [-DPOLYBENCH_TIME | -DPOLYBENCH_DUMP_ARRAYS] -w \\
        -I <polybench utilities> -I <program dir> <program>.c <utilities>/polybench.c -lm

The sizes are chosen by ``MINI_DATASET`` (tiny, for output checks),
``SMALL_DATASET`` and ``STANDARD_DATASET`` (the default; any other size
macro also gets the standard sizes).  Arrays are PolyBench arrays of
``double``, filled deterministically by ``init_array``; ``kernel_<name>``
holds the loop nest (no OpenMP pragmas) and ``print_array`` dumps the
outputs to stderr (``%0.2lf``) when built with ``-DPOLYBENCH_DUMP_ARRAYS``.
All kernels keep their values bounded (stencils average their neighbours,
iterated products are contractions), so outputs stay finite at any size.

The families (:data:`FAMILIES`), each with variants that differ in loop
order, shape or stencil size so that loop-nest optimisers (Polly) act
differently on them:

* ``stencil``: time-iterated stencils (2-D 5-point with copy-back, 2-D
  9-point, 3-D 7-point, 1-D 3-point with many time steps);
* ``conv``: 2-D convolutions with a KxK filter (K = 3, 5, 7, and K = 5
  with the filter loops outermost);
* ``transprod``: products with a transposed operand (A^T B, A B^T, the
  symmetric A^T A, the iterated mat-vec x = b + A^T x / 2);
* ``triangular``: triangular updates (lower rank-k update, B = L B in
  place, forward substitution with many right-hand sides, iterated
  upper-triangular mat-vec);
* ``colreduce``: reductions over the columns of a matrix (sums, means and
  variances, max-abs norms, x^T A), repeated for a number of passes.

The program name is ``<family>-<variant>``, its kernel function
``kernel_<family>_<variant>`` (``-`` replaced by ``_``).  Written for mirecc,
not copied from PolyBench.  Standard library only.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_LOOP_VARS = "tfcijkpq"


@dataclass(frozen=True)
class _Program:
    """One program: sizes, arrays, outputs and the kernel's loop nest."""

    doc: str
    #: size macro -> (MINI, SMALL, STANDARD)
    sizes: dict[str, tuple[int, int, int]]
    #: array name -> (its dimensions as size macros, separated by spaces,
    #: the C expression of its element [i][j].. in terms of i, j, k, l and the
    #: sizes in lower case)
    arrays: dict[str, tuple[str, str]]
    #: the arrays print_array dumps, separated by spaces
    outputs: str
    #: the kernel's body: C statements using the _PB_ loop bounds
    body: str
    #: macro -> C expression of other macros (sizes computed from the sizes)
    derived: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------------
# rendering


def _dims(p: _Program, array: str) -> list[str]:
    return p.arrays[array][0].split()


def _param(p: _Program, array: str) -> str:
    dims = _dims(p, array)
    return (f"DATA_TYPE POLYBENCH_{len(dims)}D({array}, {', '.join(dims)}, "
            f"{', '.join(d.lower() for d in dims)})")


def _loops(dims: list[str], inner: str, indent: str = "  ") -> str:
    """Nested loops over a whole array (loop variables i, j, k, l) around ``inner``."""
    lines = [f"{indent}{'  ' * n}for ({v} = 0; {v} < {d.lower()}; {v}++)"
             for n, (v, d) in enumerate(zip("ijkl", dims))]
    body = "\n".join(f"{indent}{'  ' * len(dims)}{line}" for line in inner.splitlines())
    return "\n".join(lines) + "\n" + body


def _array_decl(p: _Program, array: str) -> str:
    dims = _dims(p, array)
    both = f"{', '.join(dims)}, {', '.join(d.lower() for d in dims)}"
    if len(dims) != 4:
        return f"  POLYBENCH_{len(dims)}D_ARRAY_DECL({array}, DATA_TYPE, {both});"
    # polybench.h's POLYBENCH_4D_ARRAY_DECL has a stray comma: its expansion, by hand
    sel = ", ".join(f"POLYBENCH_C99_SELECT({d}, {d.lower()})" for d in dims)
    return (f"  DATA_TYPE POLYBENCH_4D(POLYBENCH_DECL_VAR({array}), {both});\n"
            f"  {array} = POLYBENCH_ALLOC_4D_ARRAY({sel}, DATA_TYPE);")


def _render(family: str, variant: str, p: _Program) -> str:
    name = f"{family}-{variant}"
    kernel = "kernel_" + name.replace("-", "_")
    macros = list(p.sizes) + list(p.derived)
    params = ", ".join(f"int {m.lower()}" for m in macros)
    args = ", ".join(m.lower() for m in macros)
    arrays, outputs = list(p.arrays), p.outputs.split()
    rank = max(len(_dims(p, a)) for a in arrays)
    ivars = ", ".join("ijkl"[:rank])
    out_rank = max(len(_dims(p, a)) for a in outputs)
    loop_vars = sorted(set(re.findall(r"for \((\w) =", p.body)), key=_LOOP_VARS.index)

    def sig(names: list[str]) -> str:
        return ",\n    ".join([params] + [_param(p, a) for a in names])

    def call(names: list[str]) -> str:
        return ", ".join([args] + [f"POLYBENCH_ARRAY({a})" for a in names])

    size_block = ["#if defined(MINI_DATASET)", "#elif defined(SMALL_DATASET)",
                  "#else /* STANDARD_DATASET, the default */"]
    sizes = [f"#if !{' && !'.join(f'defined({m})' for m in p.sizes)}"]
    for n, line in enumerate(size_block):
        sizes.append(line)
        sizes += [f"# define {m} {v[n]}" for m, v in p.sizes.items()]
    sizes.append("#endif\n#endif")
    sizes += [f"#define {m} {e}" for m, e in p.derived.items()]
    sizes += [f"#define _PB_{m} POLYBENCH_LOOP_BOUND({m}, {m.lower()})" for m in macros]

    def element(a: str) -> str:
        return a + "".join(f"[{v}]" for v in "ijkl"[:len(_dims(p, a))])

    inits = "\n".join(_loops(_dims(p, a), f"{element(a)} = {p.arrays[a][1]};") for a in arrays)
    prints = "\n".join(_loops(_dims(p, a), "{\n  fprintf(stderr, DATA_PRINTF_MODIFIER, "
                              f"{element(a)});\n"
                              "  if (++cnt % 20 == 0) fprintf(stderr, \"\\n\");\n}")
                       for a in outputs)
    decls = "\n".join(_array_decl(p, a) for a in arrays)
    frees = "\n".join(f"  POLYBENCH_FREE_ARRAY({a});" for a in arrays)
    sizes_main = "\n".join(f"  int {m.lower()} = {m};" for m in macros)
    local = f"  int {', '.join(loop_vars)};\n" if loop_vars else ""
    return f"""\
/* {name}: {p.doc}
 *
 * Generated by mirecc.tasks.loop_nests.offline.families (mirecc's own
 * loop-nest families); built and timed with the PolyBench harness. */
#include <stdio.h>
#include <unistd.h>
#include <string.h>
#include <math.h>

/* Include polybench common header. */
#include <polybench.h>

/* Problem sizes: MINI, SMALL or STANDARD (the default). */
{chr(10).join(sizes)}

#ifndef DATA_TYPE
# define DATA_TYPE double
# define DATA_PRINTF_MODIFIER "%0.2lf "
#endif


/* Array initialization (deterministic). */
static
void init_array({sig(arrays)})
{{
  int {ivars};

{inits}
}}


/* DCE code: scans all the live-out data (the output check). */
static
void print_array({sig(outputs)})
{{
  int {", ".join("ijkl"[:out_rank])};
  long cnt = 0;

{prints}
  fprintf(stderr, "\\n");
}}


/* Main computational kernel: the whole function is timed. */
static
void {kernel}({sig(arrays)})
{{
{local}
{p.body.strip(chr(10))}
}}


int main(int argc, char** argv)
{{
  /* Problem sizes. */
{sizes_main}

  /* Variable declaration/allocation. */
{decls}

  /* Initialize array(s). */
  init_array({call(arrays)});

  /* Start timer. */
  polybench_start_instruments;

  /* Run kernel. */
  {kernel}({call(arrays)});

  /* Stop and print timer. */
  polybench_stop_instruments;
  polybench_print_instruments;

  /* Prevent dead-code elimination: print all live-out data. */
  polybench_prevent_dce(print_array({call(outputs)}));

  /* Be clean. */
{frees}

  return 0;
}}
"""


# ---------------------------------------------------------------------------
# the families


def _nest(loops: list[tuple[str, str, str]], inner: str, indent: str = "  ") -> str:
    """Loops ``(var, lower bound, upper bound exclusive)``, outermost first, around ``inner``."""
    lines = [f"{indent}{'  ' * n}for ({v} = {lo}; {v} < {hi}; {v}++)"
             for n, (v, lo, hi) in enumerate(loops)]
    pad = indent + "  " * len(loops)
    return "\n".join(lines + [pad + line for line in inner.splitlines()])


def _time_loop(*sweeps: str) -> str:
    body = "\n".join("    " + line for s in sweeps for line in s.splitlines())
    return f"  for (t = 0; t < _PB_TSTEPS; t++) {{\n{body}\n  }}"


_INTERIOR_2D = [("i", "1", "_PB_N - 1"), ("j", "1", "_PB_N - 1")]


def _stencil() -> dict[str, _Program]:
    """Stencils with an outer time loop: each sweep replaces the interior points
    by a weighted average (weights summing to 1) of their neighbours, the
    boundary stays fixed."""

    def nine(d: str, s: str) -> str:
        return (f"{d}[i][j] = 0.2 * {s}[i][j]\n"
                f"  + 0.125 * ({s}[i-1][j] + {s}[i+1][j] + {s}[i][j-1] + {s}[i][j+1])\n"
                f"  + 0.075 * ({s}[i-1][j-1] + {s}[i-1][j+1] + {s}[i+1][j-1] + {s}[i+1][j+1]);")

    def seven(d: str, s: str) -> str:
        return (f"{d}[i][j][k] = 0.4 * {s}[i][j][k]\n"
                f"  + 0.1 * ({s}[i-1][j][k] + {s}[i+1][j][k] + {s}[i][j-1][k]\n"
                f"           + {s}[i][j+1][k] + {s}[i][j][k-1] + {s}[i][j][k+1]);")

    def three(d: str, s: str) -> str:
        return f"{d}[i] = 0.25 * ({s}[i-1] + {s}[i+1]) + 0.5 * {s}[i];"

    grid2 = "(DATA_TYPE)((i * 7 + j * 11) % 53) / 5.3"
    grid3 = "(DATA_TYPE)((i * 3 + j * 5 + k * 7) % 31) / 3.1"
    line = "(DATA_TYPE)((i * 37) % 101) / 10.1"
    cube = [("i", "1", "_PB_N - 1"), ("j", "1", "_PB_N - 1"), ("k", "1", "_PB_N - 1")]
    return {
        "2d-5pt": _Program(
            "2-D 5-point Jacobi stencil swept column by column (j outer), "
            "then copied back row by row, TSTEPS times.",
            {"TSTEPS": (2, 12, 20), "N": (24, 1000, 2000)},
            {"A": ("N N", grid2), "B": ("N N", "0.0")}, "A",
            _time_loop(
                _nest(_INTERIOR_2D[::-1], "B[i][j] = 0.5 * A[i][j]\n  + 0.125 * "
                      "(A[i-1][j] + A[i+1][j] + A[i][j-1] + A[i][j+1]);", ""),
                _nest(_INTERIOR_2D, "A[i][j] = B[i][j];", ""))),
        "2d-9pt": _Program(
            "2-D 9-point stencil, ping-pong between A and B (two sweeps per time step).",
            {"TSTEPS": (2, 20, 40), "N": (24, 750, 1500)},
            {"A": ("N N", grid2), "B": ("N N", grid2)}, "A",
            _time_loop(_nest(_INTERIOR_2D, nine("B", "A"), ""),
                       _nest(_INTERIOR_2D, nine("A", "B"), ""))),
        "3d-7pt": _Program(
            "3-D 7-point stencil, ping-pong between A and B (two sweeps per time step).",
            {"TSTEPS": (2, 10, 20), "N": (10, 120, 200)},
            {"A": ("N N N", grid3), "B": ("N N N", grid3)}, "A",
            _time_loop(_nest(cube, seven("B", "A"), ""), _nest(cube, seven("A", "B"), ""))),
        "1d-3pt": _Program(
            "1-D 3-point stencil over a cache-sized line with many time steps "
            "(ping-pong between A and B).",
            {"TSTEPS": (16, 10000, 20000), "N": (40, 4000, 16000)},
            {"A": ("N", line), "B": ("N", line)}, "A",
            _time_loop(_nest([("i", "1", "_PB_N - 1")], three("B", "A"), ""),
                       _nest([("i", "1", "_PB_N - 1")], three("A", "B"), ""))),
    }


def _conv() -> dict[str, _Program]:
    """2-D convolutions (valid part, no padding) in the layout of a CNN layer:
    NC input images X[c] of NI x NJ, NF outputs Y[f], one KS x KS filter
    W[f][c] per pair, Y[f][i][j] = sum over c, p, q of W[f][c][p][q] *
    X[c][i+p][j+q] (weights summing to about 1).  The loop order is f, c, i,
    j, p, q except for the variant whose filter loops are outermost (p, q,
    f, c, i, j)."""

    def prog(ks: int, nc: tuple[int, int, int], ni: tuple[int, int, int],
             nj: tuple[int, int, int], order: str, doc: str) -> _Program:
        """Sizes NC = NF, NI and NJ, each (MINI, SMALL, STANDARD)."""
        bounds = {"f": "_PB_NF", "c": "_PB_NC", "i": "_PB_MI", "j": "_PB_MJ",
                  "p": "_PB_KS", "q": "_PB_KS"}
        return _Program(
            doc, {"NF": nc, "NC": nc, "NI": ni, "NJ": nj, "KS": (ks, ks, ks)},
            {"X": ("NC NI NJ", "(DATA_TYPE)((i * 3 + j * 5 + k * 3) % 37) / 3.7"),
             "W": ("NF NC KS KS",
                   "(DATA_TYPE)(1 + (i + 2 * j + k * ks + l) % 4) / (2.5 * nc * ks * ks)"),
             "Y": ("NF MI MJ", "0.0")}, "Y",
            _nest([("f", "0", "_PB_NF"), ("i", "0", "_PB_MI"), ("j", "0", "_PB_MJ")],
                  "Y[f][i][j] = 0.0;") + "\n"
            + _nest([(v, "0", bounds[v]) for v in order],
                    "Y[f][i][j] += W[f][c][p][q] * X[c][i+p][j+q];"),
            {"MI": "(NI - KS + 1)", "MJ": "(NJ - KS + 1)"})

    return {
        "k3": prog(3, (2, 8, 16), (12, 640, 900), (12, 640, 900), "fcijpq",
                   "2-D convolutions with 3x3 filters over square images."),
        "k5": prog(5, (2, 8, 16), (14, 400, 560), (14, 400, 560), "fcijpq",
                   "2-D convolutions with 5x5 filters over square images."),
        "k7": prog(7, (2, 8, 16), (10, 50, 100), (20, 1200, 1200), "fcijpq",
                   "2-D convolutions with 7x7 filters over wide images (NI << NJ)."),
        "k5-filter-outer": prog(5, (2, 8, 16), (14, 400, 560), (14, 400, 560), "pqfcij",
                                "2-D convolutions with 5x5 filters, filter loops outermost "
                                "(every output is updated once per filter tap)."),
    }


def _transprod() -> dict[str, _Program]:
    """Products where one operand is read transposed (along its columns):
    C = A^T B and C = A B^T (dot-product loop order i, j, k), the symmetric
    C = A^T A as rank-1 updates of its lower triangle (k outermost), and an
    iterated mat-vec with the transposed matrix, x = b + (A^T x) / 2."""
    unit = "(DATA_TYPE)((i * 3 + j * 5 + 1) % 17) / 17.0"
    unit2 = "(DATA_TYPE)((i + 2 * j) % 13) / 13.0"

    def dot(expr: str) -> str:
        return _nest([("i", "0", "_PB_NI"), ("j", "0", "_PB_NJ")],
                     "{\n  C[i][j] = 0.0;\n" + _nest([("k", "0", "_PB_NK")], f"C[i][j] += {expr};")
                     + "\n}")

    return {
        "atb": _Program(
            "C = A^T B, loop order i, j, k (both operands read along columns).",
            {"NI": (20, 380, 700), "NJ": (24, 380, 700), "NK": (28, 380, 700)},
            {"A": ("NK NI", unit), "B": ("NK NJ", unit2), "C": ("NI NJ", "0.0")}, "C",
            dot("A[k][i] * B[k][j]")),
        "abt": _Program(
            "C = A B^T, loop order i, j, k (a dot product of two rows per element).",
            {"NI": (20, 500, 1000), "NJ": (24, 500, 1000), "NK": (28, 500, 1000)},
            {"A": ("NI NK", unit), "B": ("NJ NK", unit2), "C": ("NI NJ", "0.0")}, "C",
            dot("A[i][k] * B[j][k]")),
        "ata": _Program(
            "C = A^T A (symmetric): rank-1 updates of the lower triangle, k outermost, "
            "then mirrored to the upper triangle.",
            {"N": (24, 500, 1000), "NK": (20, 800, 1600)},
            {"A": ("NK N", unit), "C": ("N N", "0.0")}, "C",
            _nest([("i", "0", "_PB_N"), ("j", "0", "i + 1")], "C[i][j] = 0.0;") + "\n"
            + _nest([("k", "0", "_PB_NK"), ("i", "0", "_PB_N"), ("j", "0", "i + 1")],
                    "C[i][j] += A[k][i] * A[k][j];") + "\n"
            + _nest([("i", "0", "_PB_N"), ("j", "i + 1", "_PB_N")], "C[i][j] = C[j][i];")),
        "atx": _Program(
            "Iterated transposed mat-vec x = b + (A^T x) / 2, y = A^T x computed "
            "column by column (j outer, i inner), TSTEPS times.",
            {"TSTEPS": (3, 5, 10), "N": (32, 2000, 4000)},
            {"A": ("N N", "(DATA_TYPE)((i * 3 + j * 7) % 19) / (19.0 * n)"),
             "b": ("N", "(DATA_TYPE)(i % 23) / 2.3"), "x": ("N", "(DATA_TYPE)(i % 7)"),
             "y": ("N", "0.0")}, "x y",
            _time_loop(
                "for (j = 0; j < _PB_N; j++) {\n  y[j] = 0.0;\n"
                + _nest([("i", "0", "_PB_N")], "y[j] += A[i][j] * x[i];") + "\n}",
                _nest([("i", "0", "_PB_N")], "x[i] = b[i] + 0.5 * y[i];", ""))),
    }


def _triangular() -> dict[str, _Program]:
    """Updates with triangular loop bounds: a lower-triangular rank-k update
    C = C/2 + A A^T/4, the in-place product B = L B (rows from the bottom up),
    a forward substitution L X = B with many right-hand sides (X overwrites
    B, row-oriented), and an iterated upper-triangular mat-vec x = b + (U x)/2
    computed column by column."""
    lower = "j <= i ? (DATA_TYPE)((i + 2 * j) % 7 + 1) / (8.0 * (i + 1)) : 0.0"
    solve = ("i == j ? 1.0 + (DATA_TYPE)(i % 4) / 4.0 : "
             "(j < i ? (DATA_TYPE)((i * 3 + j) % 9 + 1) / (20.0 * (i + 1)) : 0.0)")
    rhs = "(DATA_TYPE)((i * 7 + j * 5) % 41) / 4.1 - 5.0"
    n_col = [("i", "0", "_PB_N")]
    return {
        "rankk-lower": _Program(
            "Lower-triangular rank-k update C = C / 2 + A A^T / 4 (j <= i), "
            "loop order i, j, k.",
            {"N": (24, 600, 1200), "NK": (20, 600, 1200)},
            {"A": ("N NK", "(DATA_TYPE)((i + j * 3) % 29) / 29.0"),
             "C": ("N N", "(DATA_TYPE)((i * j) % 11) / 1.1")}, "C",
            _nest([("i", "0", "_PB_N"), ("j", "0", "i + 1")],
                  "{\n  C[i][j] *= 0.5;\n"
                  + _nest([("k", "0", "_PB_NK")], "C[i][j] += 0.25 * A[i][k] * A[j][k];")
                  + "\n}")),
        "lower-mm": _Program(
            "In-place triangular product B = L B, rows from the bottom up, "
            "loop order i, j, k (B read along its columns).",
            {"N": (24, 600, 1200), "M": (20, 600, 1200)},
            {"L": ("N N", lower), "B": ("N M", rhs)}, "B",
            "  for (i = _PB_N - 1; i >= 0; i--)\n"
            + _nest([("j", "0", "_PB_M")], "{\n  B[i][j] *= L[i][i];\n"
                    + _nest([("k", "0", "i")], "B[i][j] += L[i][k] * B[k][j];") + "\n}",
                    "    ")),
        "forward-subst": _Program(
            "Forward substitution L X = B with M right-hand sides, X overwrites B, "
            "loop order i, k, j (row-oriented).",
            {"N": (24, 1000, 2000), "M": (20, 250, 500)},
            {"L": ("N N", solve), "B": ("N M", rhs)}, "B",
            "  for (i = 0; i < _PB_N; i++) {\n"
            + _nest([("k", "0", "i"), ("j", "0", "_PB_M")], "B[i][j] -= L[i][k] * B[k][j];",
                    "    ") + "\n"
            + _nest([("j", "0", "_PB_M")], "B[i][j] /= L[i][i];", "    ") + "\n  }"),
        "upper-mv": _Program(
            "Iterated upper-triangular mat-vec x = b + (U x) / 2, y = U x computed "
            "column by column (j outer, i <= j inner), TSTEPS times.",
            {"TSTEPS": (3, 6, 20), "N": (32, 3000, 4000)},
            {"U": ("N N", "j >= i ? (DATA_TYPE)((i + j * 5) % 13) / (13.0 * n) : 0.0"),
             "b": ("N", "(DATA_TYPE)(i % 23) / 2.3"), "x": ("N", "(DATA_TYPE)(i % 7)"),
             "y": ("N", "0.0")}, "x y",
            _time_loop(_nest(n_col, "y[i] = 0.0;", ""),
                       _nest([("j", "0", "_PB_N"), ("i", "0", "j + 1")],
                             "y[i] += U[i][j] * x[j];", ""),
                       _nest(n_col, "x[i] = b[i] + 0.5 * y[i];", ""))),
    }


def _colreduce() -> dict[str, _Program]:
    """Reductions over the columns of an M x N matrix A (signed values), each
    pass recomputing the results from scratch, TSTEPS passes so that the
    matrix can stay a moderate size: column sums (j outer), means and
    variances (two row-wise passes), max-abs norms (j outer) and the
    row-by-column products y[j] = sum over i of A[i][j] * x[i] (i outer)."""
    signed = "(DATA_TYPE)((i * (j + 3)) % 97 - 48) / (1.0 + j % 7)"
    zero = _nest([("j", "0", "_PB_N")], "{}", "")
    by_col = [("j", "0", "_PB_N")]
    rows = [("i", "0", "_PB_M"), ("j", "0", "_PB_N")]

    def colwise(init: str, update: str) -> str:
        return (f"for (j = 0; j < _PB_N; j++) {{\n  {init}\n"
                + _nest([("i", "0", "_PB_M")], update) + "\n}")

    return {
        "sum": _Program(
            "Column sums of a tall matrix, j outer, i inner (strided).",
            {"TSTEPS": (2, 12, 20), "M": (40, 4000, 8000), "N": (16, 250, 500)},
            {"A": ("M N", signed), "s": ("N", "0.0")}, "s",
            _time_loop(colwise("s[j] = 0.0;", "s[j] += A[i][j];"))),
        "meanvar": _Program(
            "Column means, then column variances (two passes over the rows, i outer).",
            {"TSTEPS": (2, 50, 50), "M": (40, 1000, 2000), "N": (24, 1000, 2000)},
            {"A": ("M N", signed), "mean": ("N", "0.0"), "var": ("N", "0.0")}, "mean var",
            _time_loop(zero.format("{ mean[j] = 0.0; var[j] = 0.0; }"),
                       _nest(rows, "mean[j] += A[i][j];", ""),
                       _nest(by_col, "mean[j] /= _PB_M;", ""),
                       _nest(rows, "var[j] += (A[i][j] - mean[j]) * (A[i][j] - mean[j]);", ""),
                       _nest(by_col, "var[j] /= _PB_M;", ""))),
        "maxabs": _Program(
            "Column max-abs norms of a wide matrix, j outer, i inner (strided).",
            {"TSTEPS": (2, 25, 50), "M": (40, 500, 1000), "N": (24, 2000, 4000)},
            {"A": ("M N", signed), "mx": ("N", "0.0")}, "mx",
            _time_loop(colwise("mx[j] = 0.0;",
                               "mx[j] = fabs(A[i][j]) > mx[j] ? fabs(A[i][j]) : mx[j];"))),
        "dot": _Program(
            "Row-by-column products y[j] = sum over i of A[i][j] * x[i], i outer, j inner.",
            {"TSTEPS": (2, 25, 50), "M": (40, 1500, 3000), "N": (24, 1500, 3000)},
            {"A": ("M N", signed), "x": ("M", "(DATA_TYPE)(i % 11) / 11.0 - 0.5"),
             "y": ("N", "0.0")}, "y",
            _time_loop(zero.format("y[j] = 0.0;"), _nest(rows, "y[j] += A[i][j] * x[i];", ""))),
    }


_PROGRAMS: dict[str, dict[str, _Program]] = {
    "stencil": _stencil(), "conv": _conv(), "transprod": _transprod(),
    "triangular": _triangular(), "colreduce": _colreduce(),
}

#: family -> its variant names (program ``<family>-<variant>``)
FAMILIES: dict[str, list[str]] = {f: list(v) for f, v in _PROGRAMS.items()}


def source(family: str, variant: str) -> str:
    """The C text of program ``<family>-<variant>``."""
    try:
        program = _PROGRAMS[family][variant]
    except KeyError:
        raise KeyError(f"no loop-nest program {family}-{variant}") from None
    return _render(family, variant, program)


def write_programs(dest: Path) -> list[Path]:
    """Write ``dest/<family>-<variant>/<family>-<variant>.c`` for every program.

    A file is only rewritten when its text changed (so build timestamps stay
    valid); returns the paths of the ``.c`` files, sorted."""
    paths = []
    for family, variants in FAMILIES.items():
        for variant in variants:
            name = f"{family}-{variant}"
            path = Path(dest) / name / f"{name}.c"
            text = source(family, variant)
            if not path.is_file() or path.read_text() != text:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
            paths.append(path)
    return sorted(paths)
