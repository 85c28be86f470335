"""Markdown tables and plots of ``mire bench devmap|coarsening`` results.

The result tables of docs/opencl.md and docs/loop-vectorize.md are this
module's output, pasted between marker
comments by ``--update-readme`` (never typed by hand)."""
from __future__ import annotations

from pathlib import Path

from mirecc.tasks.opencl.offline import benchmark as B
from mirecc.tasks.opencl.offline.datasets import GPUS
from mirecc.util.plots import pyplot, save


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def devmap_markdown(res: dict) -> str:
    plats = list(res["platforms"])
    seeds = res["fold_seeds"]
    lines = [
        f"Device mapping, {res['platforms'][plats[0]]['rows']} kernels x data sizes per "
        f"platform, 10-fold stratified CV with IR2Vec's split (`random_state=104`, "
        f"`all.txt` order); accuracy % pooled over folds (min-max over the 10 folds), "
        f"macro F1, geometric-mean speedup over static mapping (CPU on AMD, GPU on "
        f"NVIDIA); the same CV over fold seeds 0-{seeds - 1} (mean ± sd) and "
        f"leave-kernel-out (10 folds, each benchmark wholly in one).  Head: "
        f"{_head(res['head'])}.",
        "",
        "| representation + head | " + " | ".join(
            f"{p.upper()} acc | F1 | speedup | other seeds | leave-kernel-out" for p in plats) + " |",
        "|---|" + "---:|" * (5 * len(plats)),
    ]
    labels = list(res["platforms"][plats[0]]["results"])
    for label in labels:
        cells = []
        for p in plats:
            e = res["platforms"][p]["results"][label]
            m = e["ir2vec_folds"]
            cells += [f"**{_pct(m['accuracy'])}** ({_pct(m['fold_accuracy_min'])}-"
                      f"{_pct(m['fold_accuracy_max'])})", f"{m['f1_macro']:.3f}",
                      f"{m['speedup_geomean']:.3f}",
                      (f"{_pct(e['other_seeds']['accuracy_mean'])} ± "
                       f"{_pct(e['other_seeds']['accuracy_sd'])}" if "other_seeds" in e else ""),
                      (_pct(e["leave_kernel_out"]["accuracy"]) if "leave_kernel_out" in e else "")]
        rows_note = (f" ({res['platforms'][plats[0]]['results'][label]['ir2vec_folds']['rows']} rows)"
                     if label.startswith("src:") else "")
        lines.append(f"| {label}{rows_note} | " + " | ".join(cells) + " |")
    for model in res["platforms"][plats[0]]["prior_art"]:
        cells = []
        for p in plats:
            m = res["platforms"][p]["prior_art"].get(model)
            cells += ([f"{_pct(m['accuracy'])}", "", f"{m['speedup_geomean']:.3f}", "", ""]
                      if m else [""] * 5)
        lines.append(f"| {model} (prior_art/, its own folds) | " + " | ".join(cells) + " |")
    for name in B.DEVMAP_PUBLISHED:
        cells = []
        for p in plats:
            cells += [f"{res['platforms'][p]['published'][name]:.1f}", "", "", "", ""]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("| oracle | " + " | ".join(
        f"100 |  | {res['platforms'][p]['oracle']['speedup_geomean']:.3f} |  | " for p in plats)
        + " |")
    lines += ["", _devmap_verdict(res), "", _label_efficiency_table(res), "",
              f"Machine: {res['machine']['cpu']}, {res['machine']['cores']} cores; "
              f"whole run {res['seconds']:.0f} s."]
    return "\n".join(lines) + "\n"


def _head(cfg: dict) -> str:
    return (f"MLP {cfg['layers']}x{cfg['hidden']} ReLU, AdamW lr {cfg['lr']:g}, weight decay "
            f"{cfg['weight_decay']:g}, {cfg['epochs']} full-batch epochs, ensemble of "
            f"{cfg['ensemble']}, standardised inputs")


def _devmap_verdict(res: dict) -> str:
    parts = []
    for p, d in res["platforms"].items():
        acc = d["results"]["mirecc"]["ir2vec_folds"]["accuracy"]
        verdict = "met" if acc >= B.DEVMAP_TARGET else "NOT met"
        parts.append(f"{p.upper()} {_pct(acc)}% (target {_pct(B.DEVMAP_TARGET)}: {verdict})")
    d0 = next(iter(res["platforms"].values()))
    return ("mirecc on the dataset IR: " + "; ".join(parts) + f".  OpenCL sources that clang "
            f"compiles: {d0['src_kernels'] - d0['src_failed_kernels']} of {d0['src_kernels']} "
            f"kernels ({d0['src_rows']} rows).")


def _label_efficiency_table(res: dict) -> str:
    plats = list(res["platforms"])
    first = res["platforms"][plats[0]]["results"]
    labels = [k for k, v in first.items() if "label_efficiency" in v]
    fractions = list(first[labels[0]]["label_efficiency"]) if labels else []
    lines = ["Label efficiency: accuracy % on IR2Vec's folds when the head sees a stratified "
             "share of each training fold.", "",
             "| representation + head | platform | " + " | ".join(
                 f"{float(f) * 100:g}%" for f in fractions) + " |",
             "|---|---|" + "---:|" * len(fractions)]
    for label in labels:
        for p in plats:
            le = res["platforms"][p]["results"][label]["label_efficiency"]
            lines.append(f"| {label} | {p.upper()} | " + " | ".join(_pct(le[f]) for f in fractions)
                         + " |")
    return "\n".join(lines)


def coarsening_markdown(res: dict) -> str:
    lines = [
        f"Thread coarsening, {res['kernels']} kernels x {len(GPUS)} GPUs; mean speedup over "
        f"factor 1 (arithmetic, per GPU, factor capped at the kernel's largest measured); "
        f"leave-one-row-out as IR2Vec (the kernel's other GPUs are in training) and "
        f"leave-one-kernel-out (per-GPU spread of the per-kernel speedups: sd, min, max, "
        f"geometric mean, in the JSON).  Head: {_head(res['head'])}.",
        "",
        "| representation + head | " + " | ".join(GPUS) + " | average | leave-kernel-out avg |",
        "|---|" + "---:|" * (len(GPUS) + 2),
    ]
    for label, e in res["results"].items():
        row, ker = e["leave_one_row_out"], e["leave_one_kernel_out"]
        note = f" ({row['rows']} rows)" if label.startswith("src:") else ""
        lines.append(f"| {label}{note} | " + " | ".join(f"{row['speedup'][g]:.3f}" for g in GPUS)
                     + f" | **{row['speedup_average']:.3f}** | {ker['speedup_average']:.3f} |")
    for model, m in res["prior_art"].items():
        lines.append(f"| {model} (prior_art/) | " + " | ".join(
            f"{m['speedup'].get(g, float('nan')):.3f}" for g in GPUS)
            + f" | {m['speedup_average']:.3f} | |")
    for name, per in res["published"].items():
        lines.append(f"| {name} | " + " | ".join(f"{per[g]:.2f}" for g in GPUS)
                     + f" | {per['average']:.2f} | |")
    o = res["oracle"]
    lines.append("| oracle (best factor) | " + " | ".join(f"{o['speedup'][g]:.3f}" for g in GPUS)
                 + f" | {o['speedup_average']:.3f} | |")
    avg = res["results"]["mirecc"]["leave_one_row_out"]["speedup_average"]
    verdict = "met" if avg >= B.COARSENING_TARGET else "NOT met"
    lines += ["", f"mirecc average {avg:.3f} (target {B.COARSENING_TARGET}: {verdict}).  "
              f"OpenCL sources that clang compiles: {res['kernels'] - res['src_kernels_failed']} "
              f"of {res['kernels']} kernels.", "",
              f"Machine: {res['machine']['cpu']}, {res['machine']['cores']} cores; "
              f"whole run {res['seconds']:.0f} s."]
    return "\n".join(lines) + "\n"


def plot(res: dict, path: Path) -> bool:
    """A PNG beside the tables; False (and nothing written) without matplotlib."""
    plt = pyplot()
    if plt is None:
        return False
    if res["task"] == "devmap":
        plats = list(res["platforms"])
        fig, axes = plt.subplots(1, 2, figsize=(13, 5))
        labels = [k for k in res["platforms"][plats[0]]["results"] if not k.startswith("src:")]
        width = 0.8 / len(plats)
        for j, p in enumerate(plats):
            r = res["platforms"][p]["results"]
            acc = [100 * r[k]["ir2vec_folds"]["accuracy"] for k in labels]
            lo = [a - 100 * r[k]["ir2vec_folds"]["fold_accuracy_min"] for a, k in zip(acc, labels)]
            hi = [100 * r[k]["ir2vec_folds"]["fold_accuracy_max"] - a for a, k in zip(acc, labels)]
            axes[0].barh([i + j * width for i in range(len(labels))], acc, width,
                         xerr=[lo, hi], label=p.upper(), capsize=2)
        axes[0].axvline(100 * B.DEVMAP_TARGET, color="k", ls="--", lw=1, label="target")
        axes[0].set_yticks([i + width / 2 for i in range(len(labels))], labels, fontsize=8)
        axes[0].set_xlim(50, 100)
        axes[0].set_xlabel("accuracy % (IR2Vec folds; bars: fold min-max)")
        axes[0].invert_yaxis()
        axes[0].legend(fontsize=8)
        for p in plats:
            r = res["platforms"][p]["results"]
            for k in (k for k in r if "label_efficiency" in r[k]):
                le = r[k]["label_efficiency"]
                axes[1].plot([100 * float(f) for f in le], [100 * v for v in le.values()],
                             marker="o", label=f"{k} ({p.upper()})")
        axes[1].set_xscale("log")
        axes[1].set_xlabel("% of each training fold used")
        axes[1].set_ylabel("accuracy %")
        axes[1].set_title("label efficiency")
        axes[1].legend(fontsize=7)
    else:
        fig, ax = plt.subplots(figsize=(12, 5))
        labels = list(res["results"])
        groups = GPUS + ("average",)
        width = 0.8 / len(labels)
        for j, k in enumerate(labels):
            row = res["results"][k]["leave_one_row_out"]
            vals = [row["speedup"][g] for g in GPUS] + [row["speedup_average"]]
            ax.bar([i + j * width for i in range(len(groups))], vals, width, label=k)
        o = res["oracle"]
        ax.scatter([i + 0.4 - width / 2 for i in range(len(groups))],
                   [o["speedup"][g] for g in GPUS] + [o["speedup_average"]],
                   marker="_", s=400, color="k", label="oracle", zorder=3)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(groups))], groups)
        ax.set_ylabel("mean speedup over factor 1 (leave-one-row-out)")
        ax.legend(fontsize=7, ncol=2)
    save(fig, path)
    return True


