"""``mire bench devmap`` / ``mire bench coarsening``: run the comparison,
save ``<out>/<task>.md``, ``.json`` and ``.png``, optionally paste the table
into a docs page (docs/opencl.md) and write the heads the driver uses.

Needs the training and benchmark extras: ``pip install 'mirecc[train,bench]'``
(torch for the heads, scikit-learn for the split, xgboost and ir2vec for the
IR2Vec rows, matplotlib for the plot)."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from mirecc.encoder import SHIPPED_MODEL_DIR
from mirecc.learn.embeddings import default_cache_root
from mirecc.learn.pages import update_page
from mirecc.tasks.opencl.offline import benchmark as B
from mirecc.tasks.opencl.offline import report
from mirecc.tasks.opencl.offline.datasets import DatasetError, default_root
from mirecc.tasks.opencl.offline.mlp import HeadConfig
from mirecc.tasks.opencl.offline.ship import write_task_heads
from mirecc.util.fsutil import atomic_write_bytes

TASKS = ("devmap", "coarsening")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("devmap / coarsening")
    g.add_argument("--datasets", type=Path, default=None,
                   help="the datasets folder (default: $MIRECC_DATASETS, else "
                        "../shared/datasets beside the checkout)")
    g.add_argument("--model", type=Path, default=None,
                   help="encoder model directory for devmap, coarsening and size (default: the shipped one)")
    g.add_argument("--random-model", type=Path, default=None,
                   help="random-init encoder for the ablation (default: exported once "
                        "into the cache directory)")
    g.add_argument("--fold-seeds", type=int, default=5,
                   help="device mapping: also run the CV over fold seeds 0..N-1 "
                        "(default: %(default)s)")
    g.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="parallel cross-validations (default: %(default)s)")
    g.add_argument("--cache", type=Path, default=None,
                   help="embedding cache directory (default: ~/.cache/mirecc/task-embeddings)")
    g.add_argument("--update-readme", "--update-page", type=Path, default=None,
                   metavar="PAGE", dest="update_readme",
                   help="replace the table between this page's '<!-- mire bench TASK: "
                        "begin/end -->' markers (docs/opencl.md, docs/loop-vectorize.md)")
    g.add_argument("--write-heads", type=Path, default=None, metavar="DIR",
                   help="also train the heads on every row and write them under DIR "
                        "(the shipped ones: heads/)")


def run(args: argparse.Namespace) -> int:
    try:
        import torch  # noqa: F401  (the heads train with torch)
        import xgboost  # noqa: F401
        import sklearn  # noqa: F401
    except ImportError as exc:
        print(f"mire bench {args.suite}: {exc}; install the extras: "
              "pip install 'mirecc[train,bench]'", file=sys.stderr)
        return 2
    # lazy: encoder.export imports torch (~2 s); only run() needs it
    from mirecc.encoder.export import random_init_model_dir

    root = args.datasets or default_root()
    if not root.is_dir():
        print(f"mire bench {args.suite}: {root}: datasets folder not found "
              "(give --datasets or set MIRECC_DATASETS)", file=sys.stderr)
        return 2
    trained = args.model or SHIPPED_MODEL_DIR
    cache = args.cache or default_cache_root()
    random = args.random_model or random_init_model_dir(trained, cache / "models", seed=0)
    model_dirs = {"trained": trained, "random": random}
    config = HeadConfig()
    try:
        if args.suite == "devmap":
            res = B.run_devmap(root, model_dirs, config, args.fold_seeds, args.jobs, cache)
            md = report.devmap_markdown(res)
        else:
            res = B.run_coarsening(root, model_dirs, config, args.jobs, cache)
            md = report.coarsening_markdown(res)
    except DatasetError as exc:
        print(f"mire bench {args.suite}: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res["command"] = "mire bench " + " ".join(sys.argv[2:] if len(sys.argv) > 2 else [args.suite])
    atomic_write_bytes(out / f"{args.suite}.json", json.dumps(res, indent=1).encode())
    atomic_write_bytes(out / f"{args.suite}.md", md.encode())
    plotted = report.plot(res, out / f"{args.suite}.png")
    print(md)
    print(f"saved {out / (args.suite + '.md')}, .json"
          + (", .png" if plotted else " (no plot: pip install matplotlib)"))
    if args.update_readme:
        update_page(args.update_readme, args.suite, md)
        print(f"updated {args.update_readme}")
    if args.write_heads:
        for path in write_task_heads(args.suite, root, trained, config, res, args.write_heads,
                                     cache):
            print(f"wrote head {path}")
    return 0
