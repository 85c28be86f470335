"""``mire size-order``: each library pipeline's compile cost and the order
the driver builds them in, from the labels of the training packages.

The cost of a pipeline is the median, over the training modules, of its
build seconds (``opt`` and the back end) over clang's own ``-Oz`` of the
same bitcode: what the ``size_budget`` setting is spent in (a budget of 1:
candidates that together cost about one more compile of the TU).

The order is greedy by bytes per second: first the pipeline that saves the
most ``.text`` bytes over ``-Oz`` on the training modules per unit of cost,
then the one that adds the most to the best of those before it, per unit
of cost, and so on (a pipeline that adds nothing goes last, in the
library's order).  Held-out packages are never read.

    mire size-order [--labels heads/code-size/labels] [--cc clang-19] [--write-spec]
"""
from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from pathlib import Path

from mirecc.frontend.compiler import clang_major
from mirecc.tasks.code_size.offline import cli as size_cli
from mirecc.tasks.code_size.offline.cli import ROOT
from mirecc.tasks.code_size.offline.labels import OWN


def read_labels(directory: Path) -> tuple[dict, dict]:
    """(module sha -> split, module sha -> pipeline text -> row) of a labels
    directory: the committed export (``*.jsonl.gz``) or ``mire size-data``'s
    own (``*.jsonl``, where modules' splits come from ``modules.jsonl``)."""
    def lines(name: str):
        for path, opener in ((directory / f"{name}.jsonl.gz", gzip.open),
                             (directory / f"{name}.jsonl", open)):
            if path.is_file():
                with opener(path, "rt", encoding="utf-8") as fh:
                    for number, line in enumerate(fh, 1):
                        try:
                            yield json.loads(line)
                        except ValueError:
                            if line.strip():
                                raise ValueError(f"{path}:{number}: not a JSON line") from None
                return
        raise ValueError(f"{directory}: no {name}.jsonl(.gz) (mire size-data --export writes "
                         f"them)")

    texts = {OWN: OWN, **{r["id"]: r["pipeline"] for r in lines("pipelines")}}
    splits = {r["sha256"]: r["split"] for r in lines("modules")}
    table: dict[str, dict[str, dict]] = {}
    for row in lines("labels"):
        text = texts.get(row.get("pipeline"))
        if text is not None:
            table.setdefault(row["module"], {})[text] = row
    return splits, table


def training_rows(splits: dict, table: dict, library: list[str]) -> list[dict]:
    """The training modules with ``-Oz`` and every library pipeline measured."""
    out = []
    for module, rows in table.items():
        own = rows.get(OWN)
        if splits.get(module) == "train" and own and own.get("text_bytes") \
                and own.get("seconds") and all(p in rows for p in library):
            out.append(rows)
    return out


def costs(rows: list[dict], library: list[str]) -> list[float]:
    """Each pipeline's median build seconds over -Oz's, two decimals."""
    return [round(statistics.median(r[p].get("seconds", 0.0) / r[OWN]["seconds"]
                                    for r in rows), 2) for p in library]


def greedy_order(rows: list[dict], library: list[str], cost: list[float]) -> list[int]:
    """Indices of ``library``, greedy by bytes saved per unit of cost."""
    saved = [[max(0, r[OWN]["text_bytes"] - r[p]["text_bytes"]) if "error" not in r[p] else 0
              for p in library] for r in rows]
    best = [0] * len(rows)
    order: list[int] = []
    left = list(range(len(library)))
    while left:
        gains = {j: sum(max(s[j], b) - b for s, b in zip(saved, best)) for j in left}
        j = max(left, key=lambda j: (gains[j] / max(cost[j], 1e-6), -j))
        if gains[j] <= 0:
            return order + left          # nothing more to add: the library's order
        order.append(j)
        left.remove(j)
        best = [max(s[j], b) for s, b in zip(saved, best)]
    return order


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--labels", default=str(ROOT / "heads" / "code-size" / "labels"),
                        help="labels of mire size-data: its output or the committed export "
                             "(default: %(default)s; LLVM 19's: its llvm-19 folder)")
    parser.add_argument("--cc", help="the clang whose library is ordered (default: the one "
                        "mirecc drives)")
    parser.add_argument("--write-spec", action="store_true",
                        help="write the order and the costs into heads/code-size/spec.yaml")


def run(args: argparse.Namespace) -> int:
    compiler = size_cli.compiler_of(args)
    major = clang_major(compiler)
    named = size_cli.named_library(compiler)
    library = [passes for _, passes in named]
    try:
        splits, table = read_labels(Path(args.labels))
    except (ValueError, OSError) as exc:
        print(f"mire size-order: {exc}", file=sys.stderr)
        return 2
    rows = training_rows(splits, table, library)
    if not rows:
        print(f"mire size-order: no training module in {args.labels} has -Oz and all "
              f"{len(library)} pipelines of the LLVM {major} library measured (mire size-data "
              f"--split train)", file=sys.stderr)
        return 2
    cost = costs(rows, library)
    order = greedy_order(rows, library, cost)
    own_total = sum(r[OWN]["text_bytes"] for r in rows)
    best = [0] * len(rows)
    print(f"mire size-order: LLVM {major}, {len(rows)} training modules, "
          f"{own_total:,} bytes of .text at -Oz")
    print(f"{'#':>3} {'cost':>5} {'saved, cumulative':>18}  pipeline")
    for rank, j in enumerate(order, 1):
        for i, r in enumerate(rows):
            if "error" not in r[library[j]]:
                best[i] = max(best[i], r[OWN]["text_bytes"] - r[library[j]]["text_bytes"])
        print(f"{rank:>3} {cost[j]:>5.2f} {sum(best) / own_total:>17.2%}  {named[j][0][:90]}")
    if args.write_spec:
        size_cli.write_spec(major, [named[j] for j in order],
                            costs={named[j][0]: cost[j] for j in order})
        print(f"mire size-order: wrote the order and costs into {size_cli.SPEC}")
    return 0
