#!/usr/bin/python3
"""Draws the paper's Figs 7-11 and the model-accuracy Fig 12 from a brickdl tuning database.

    figures.py DB OUTDIR [--target PREFIX] [--gpu SPEC] [--precision P] [--batch N]
               [--only fig7,fig8,...] [--formats png,pdf]

Every figure is written as OUTDIR/<name>.png and .pdf; OUTDIR/figures.json holds the numbers
behind them and OUTDIR/model_vs_paper.md the table of ours against the paper's (Figs 7, 8,
10, 11). Figs 7-11 show ours against both layerwise baselines, each in a panel of its own or
as a line of its own: L (cuDNN fused, the honest one) and U (the paper's unfused cuDNN), then
the paper's A100 values (results/paper_reference.py). See results/README.md.
"""
import argparse
import json
import os
import re
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after selecting the Agg backend)
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.text import Text  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import figdata as fd  # noqa: E402
import paper_reference as ref  # noqa: E402

FIGURES = {
    "fig7": "fig7_models",
    "fig8": "fig8_resnet50_subgraphs",
    "fig9": "fig9_resnet50_transactions",
    "fig10": "fig10_graphsize",
    "fig11": "fig11_bricksize",
    "fig12": "fig12_model_accuracy",
}
VERSUS_FILE = "model_vs_paper.md"

# The paper's palette, and ours for what the paper has not.
COLORS = {
    "idle": "#eba9cc", "dram": "#e8351c", "compute": "#0070c0",
    "atomics_compulsory": "#ff9900", "atomics_conflict": "#00b050", "other": "#a6a6a6",
    "layerwise": "#d00000", "unfused": "#6b2c91", "plan": "#2e6fbd",
    "pytorch-eager": "#9c7bd6", "torch-compile": "#a9d18e", "jax-xla": "#f4b183",
    "l1": "#f0a860", "l2": "#a48cf0", "dram_tx": "#e00000",
}
LABELS = {
    "idle": "Idle", "dram": "DRAM", "compute": "Compute",
    "atomics_compulsory": "Atomics (compulsory)", "atomics_conflict": "Atomics (conflict)",
    "other": "Other",
}
MEMORY_KEYS = ("idle", "dram")
COMPUTE_KEYS = ("compute", "atomics_compulsory", "atomics_conflict", "other")
LETTER = {"unfused": "U", "layerwise": "L", "padded": "P", "memoized": "M", "cudnn": "C"}
SPLIT_NOTE = ("split: the model's predicted component fractions (scaled to the measured total "
              "where a bar is measured)")
PAPER_TITLE = f"paper: {ref.GPU} ({ref.SOURCE})"

# The two layerwise baselines (DESIGN.md 8b), as every figure names them.
BASELINE_TEXT = {
    "layerwise": "L = our layerwise baseline, cuDNN fused: conv + bias + activation in one "
                 "library call with its best algorithm; the model charges it at the library's "
                 "roofline. The honest comparison.",
    "unfused": "U = the paper's own cuDNN baseline (its artifact): each conv with a fixed "
               "IMPLICIT_GEMM algorithm, then bias, batch-norm and activation each a pass of "
               "its own over the output (three or more passes over every output). The paper's "
               "comparison, reproduced.",
}
# Reference lines: our two baselines and the paper's cuDNN (legend labels given per use).
LINE_STYLE = {
    "layerwise": dict(color="black", linestyle="--", linewidth=1.0),
    "unfused": dict(color=COLORS["unfused"], linestyle=":", linewidth=1.6),
    "cudnn": dict(color="#d00000", linestyle="--", linewidth=1.0),
}
DIAMOND = dict(marker="D", color="black", markersize=4, linestyle="", zorder=5)
# The paper's values beside ours against L: normalized to the paper's own (unfused) cuDNN.
PAPER_VALUE_NOT_L = f"paper's value ({ref.GPU}),\nnormalized to ITS cuDNN\n(unfused: U), not to L"
SEPARATOR = "separator"  # gid of the grey lines between bar groups (no legend entry)
# Figure name -> what its last drawing shows (figure_facts): per axes its title, legend
# entries, y scale and limits, texts; the footnotes; and layout_problems. For the tests and
# figures.json.
FIGURE_FACTS = {}


# ---- layout: panels, subtitle, footnotes, and the checks ------------------------------------

SUBTITLE_PT = 7.5
FOOTNOTE_PT = 7.0


def _panels(nrows, width, panel_h, gap_in=1.35, ncols=1):
    """A figure of `nrows` x `ncols` axes of `panel_h` inches; _finish adds the margins."""
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, nrows * panel_h
                                                    + (nrows - 1) * gap_in), squeeze=False)
    fig.brickdl_grid = (nrows, panel_h, gap_in)
    return fig, [ax for row in axes for ax in row]


def _wrap(text, width_in, pt, indent=""):
    """Lines of `text` that fit `width_in` inches at `pt` points (a generous average glyph
    width, so that no line runs out of the figure: layout_problems checks)."""
    chars = max(20, int(width_in * 72 / (pt * 0.6)))
    lines = []
    for paragraph in text.split("\n"):
        lines += textwrap.wrap(paragraph, chars, subsequent_indent=indent) or [""]
    return lines


class Footnotes:
    """Numbered notes under the axes: a missing bar says '[n]' at its foot and the full reason
    is listed below the figure, so that no reason is ever cut."""

    def __init__(self):
        self.items = []

    def ref(self, text):
        if text not in self.items:
            self.items.append(text)
        return f"[{self.items.index(text) + 1}]"


def _finish(fig, outdir, name, title, subtitle, notes=None, right=0.83, bottom_in=0.85,
            left=0.08):
    """Titles the figure, lays it out (the margins grow with the subtitle and the footnotes),
    checks the layout (FIGURE_FACTS) and writes it in every format of FORMATS."""
    width = fig.get_size_inches()[0]
    nrows, panel_h, gap_in = fig.brickdl_grid
    sub = _wrap(subtitle, width * 0.96, SUBTITLE_PT)
    feet = []
    for i, item in enumerate(notes.items if notes else []):
        feet += _wrap(f"[{i + 1}] {item}", width * 0.96, FOOTNOTE_PT, indent="      ")
    line_in = 1.25 / 72
    top_in = 0.45 + len(sub) * SUBTITLE_PT * line_in + 0.4
    foot_in = len(feet) * FOOTNOTE_PT * line_in + (0.15 if feet else 0.0)
    bottom = bottom_in + foot_in
    height = nrows * panel_h + (nrows - 1) * gap_in + top_in + bottom
    fig.set_size_inches(width, height)
    fig.suptitle(title, fontsize=12, fontweight="bold", y=1 - 0.08 / height, va="top")
    fig.text(0.5, 1 - 0.42 / height, "\n".join(sub), ha="center", va="top",
             fontsize=SUBTITLE_PT, color="#222222")
    if feet:
        fig.text(0.015, (foot_in + 0.05) / height, "\n".join(feet), ha="left", va="top",
                 fontsize=FOOTNOTE_PT, color="#333333")
    # Fixed margins instead of tight_layout: as readable here and several times faster.
    fig.subplots_adjust(left=left, right=right, bottom=bottom / height,
                        top=1 - top_in / height, hspace=gap_in / panel_h, wspace=0.25)
    FIGURE_FACTS[name] = figure_facts(fig, notes, "\n".join(sub))
    for problem in FIGURE_FACTS[name]["problems"]:
        print(f"brickdl-figures: warning: {name}: {problem}", file=sys.stderr)
    paths = []
    for ext in FORMATS:
        path = os.path.join(outdir, f"{name}.{ext}")
        # No creation date in PDFs: the same data gives the same files.
        fig.savefig(path, dpi=130, metadata={"CreationDate": None} if ext == "pdf" else None)
        paths.append(path)
    plt.close(fig)
    return paths


def _legend_handles(legend):
    if legend is None:
        return []
    return list(getattr(legend, "legend_handles", None) or legend.legendHandles)


def _norm_marker(m):
    return "None" if m in (None, "", " ", "None", "none") else str(m)


def _norm_style(s):
    return "None" if s in (None, "", " ", "None", "none") else str(s)


def _line_key(line):
    rgb = tuple(round(c, 3) for c in matplotlib.colors.to_rgb(line.get_color()))
    marker = _norm_marker(line.get_marker())
    style = _norm_style(line.get_linestyle())
    return (marker, style if marker == "None" or style != "None" else "None", rgb)


def figure_facts(fig, notes=None, subtitle=""):
    """What a drawn figure shows, as plain data: per axes the title, legend entries, y scale
    and limits, and its texts; the subtitle and footnotes; and the layout's problems."""
    problems = layout_problems(fig)
    axes = []
    for ax in fig.axes:
        legend = ax.get_legend()
        axes.append({"title": ax.get_title(loc="left"), "yscale": ax.get_yscale(),
                     "ylim": list(ax.get_ylim()),
                     "legend": [t.get_text() for t in legend.get_texts()] if legend else [],
                     "texts": [t.get_text() for t in ax.texts]})
    return {"axes": axes, "footnotes": list(notes.items) if notes else [],
            "subtitle": subtitle, "problems": problems}


def layout_problems(fig):
    """What a reader could not read: text running out of the figure (cut), lines or markers
    without an entry in their axes' legend, bar colours without one in any legend."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    problems = []
    undrawn = set()  # labels of ticks outside the axis' view, which are never drawn
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                loc = tick.get_loc()
                if loc is None or not lo - 1e-9 * abs(hi - lo) <= loc <= hi + 1e-9 * abs(hi - lo):
                    undrawn.update((id(tick.label1), id(tick.label2)))
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip() or id(t) in undrawn:
            continue
        e = t.get_window_extent(renderer)
        if (e.x0 < box.x0 - 1 or e.x1 > box.x1 + 1 or e.y0 < box.y0 - 1
                or e.y1 > box.y1 + 1):
            problems.append(f"text out of the figure (cut): {t.get_text()[:60]!r}")
    legend_colors = set()
    for ax in fig.axes:
        for h in _legend_handles(ax.get_legend()):
            if isinstance(h, Patch):
                legend_colors.add(tuple(round(c, 3) for c in h.get_facecolor()[:3]))
    for i, ax in enumerate(fig.axes):
        keys = {_line_key(h) for h in _legend_handles(ax.get_legend())
                if isinstance(h, Line2D)}
        for line in ax.lines:
            if line.get_gid() == SEPARATOR or not line.get_visible():
                continue
            if _line_key(line) not in keys:
                problems.append(f"axes {i + 1}: a line or marker without a legend entry "
                                f"({_line_key(line)})")
        for patch in ax.patches:
            if not isinstance(patch, Patch):
                continue
            rgb = tuple(round(c, 3) for c in patch.get_facecolor()[:3])
            if rgb not in legend_colors:
                problems.append(f"axes {i + 1}: a bar colour without a legend entry {rgb}")
    return sorted(set(problems))


# ---- small drawing helpers ---------------------------------------------------------------

def _no_data(ax, text):
    ax.text(0.5, 0.5, "\n".join(_wrap(text, 7.5, 9)), ha="center", va="center",
            transform=ax.transAxes, fontsize=9, color="#444444")
    ax.set_xticks([])


def _source_tag(ax, x, source, fontsize=6):
    """Says at the foot of a bar whether it is measured (GPU / CPU) or predicted (model)."""
    ax.text(x, 0.01, fd.SOURCE_SHORT.get(source, source), ha="center", va="bottom",
            fontsize=fontsize, color="black", rotation=90, transform=ax.get_xaxis_transform(),
            bbox=dict(boxstyle="square,pad=0.1", facecolor="white", edgecolor="none",
                      alpha=0.7))


def _stack(ax, x, width, parts, keys, hatch=None):
    """Stacked bar at x from parts {key: value} in the order of keys."""
    bottom = 0.0
    for k in keys:
        v = parts.get(k, 0.0) or 0.0
        if v > 0:
            ax.bar(x, v, width, bottom=bottom, color=COLORS[k], edgecolor="black",
                   linewidth=0.4, hatch=hatch)
        bottom += v
    return bottom


def _mc_pair(ax, x, width, memory, compute):
    """The paper's M/C bar pair: memory side at x - width/2, compute side at x + width/2."""
    top_m = _stack(ax, x - width / 2, width, memory, MEMORY_KEYS)
    top_c = _stack(ax, x + width / 2, width, compute, COMPUTE_KEYS)
    return max(top_m, top_c)


def _y_limit(ax, tops, floor, cap, headroom=1.1):
    """Sets the y range to fit the bars (with headroom) but at most `cap`; a bar cut by the
    cap gets its value written at the top. Returns whether any bar was cut."""
    top = max([floor] + [t for _, t in tops])
    limit = min(top * headroom, cap)
    ax.set_ylim(0, limit)
    cut = False
    for x, t in tops:
        if t > limit:
            cut = True
            ax.text(x, limit * 0.97, f"{t:.2f}", ha="center", va="top", fontsize=6,
                    rotation=90, color="black",
                    bbox=dict(boxstyle="square,pad=0.1", facecolor="white", edgecolor="none"))
    return cut


def _missing_tag(ax, x, why, notes):
    """In place of a bar that does not exist: a footnote number; the reason under the axes."""
    ax.text(x, 0.02, f"no bar {notes.ref(why)}", rotation=90, ha="center", va="bottom",
            fontsize=6, color="#555555", transform=ax.get_xaxis_transform())


def _separator(ax, x):
    ax.axvline(x, color="#bbbbbb", linewidth=0.8, gid=SEPARATOR)


def _hline(ax, y, key):
    ax.axhline(y, **LINE_STYLE[key])


def _line_entry(key, label):
    return plt.Line2D([], [], label=label, **LINE_STYLE[key])


def _diamond_entry(label):
    return plt.Line2D([], [], label=label, **DIAMOND)


def _side_legend(ax, handles):
    """A legend outside the axes, on the right (the figures keep a margin for it)."""
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), ncol=1,
              fontsize=7, frameon=False, borderaxespad=0.0)


def _breakdown_handles():
    return [Patch(facecolor=COLORS[k], edgecolor="black", label=LABELS[k])
            for k in MEMORY_KEYS + COMPUTE_KEYS]


def _sources_text(sources):
    return ", ".join(sorted(set(s for s in sources if s))) if sources else "no data"


def _runs_line(runs, sources):
    if not runs:
        return "ours: no tuning run of this figure's experiment(s) in the database"
    targets = sorted({r.target for r in runs})
    specs = sorted({r.gpu_spec for r in runs})
    batches = sorted({r.batch for r in runs})
    precisions = sorted({r.precision for r in runs})
    return (f"ours: target {', '.join(targets)} · model spec {', '.join(specs)} · batch "
            f"{', '.join(str(b) for b in batches)} · {', '.join(precisions)} · bars: "
            f"{_sources_text(sources)}")


def _subtitle(*parts):
    return "\n".join(p for p in parts if p)


def _range(values, fmt="{:.2f}"):
    values = [v for v in values if v is not None]
    if not values:
        return None
    lo, hi = min(values), max(values)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else (
        f"{fmt.format(lo)}-{fmt.format(hi)}")


def _verdict(ours, paper):
    """Where our values lie against the paper's: a few words."""
    ours = [v for v in ours if v is not None]
    if not ours or not paper:
        return ""
    if min(ours) > max(paper):
        return "all above the paper's"
    if max(ours) < min(paper):
        return "all below the paper's"
    return "overlapping the paper's range"


def _kind(sources):
    return "/".join(sorted({fd.SOURCE_SHORT.get(s, s) for s in sources if s})) or "n/a"


def _baseline_lines():
    """The subtitle's definitions of L and U (a panel or a footnote says where U is absent)."""
    return [BASELINE_TEXT["layerwise"], BASELINE_TEXT["unfused"]]


# ---- Fig 7 -----------------------------------------------------------------------------------

def _fig7_note(data):
    """Model vs paper in one or two lines, from the numbers on the figure."""
    ms = {n: m for n, m in data.items() if m is not None}
    if not ms:
        return ""
    paper = {n: ref.FIG7[n] for n in ms if n in ref.FIG7}
    ours = [m.plan.total for m in ms.values()]
    theirs = [p["brickdl_memory"] + p["brickdl_compute"] for p in paper.values()]
    l_dram = [m.layerwise.dram / m.layerwise.total for m in ms.values() if m.layerwise.total]
    p_mem = [p["cudnn_memory"] for p in paper.values()]
    kinds = _kind(m.source for m in ms.values())
    text = (f"model vs paper: the plan is {_range(ours)} of L ({kinds}; "
            f"{_verdict(ours, theirs)} {_range(theirs)} of its cuDNN); DRAM is "
            f"{_range(l_dram, '{:.0%}')} of L, the paper's cuDNN is {_range(p_mem, '{:.0%}')} "
            "memory. Why: the paper's cuDNN is U, unfused (its passes re-read and re-write every "
            "output), while L is fused and charged at the library's roofline.")
    views = [m.against_unfused for m in ms.values() if m.against_unfused]
    if views:
        u_plan = [v.normalized["plan"].total for v in views]
        u_dram = [v.bars["unfused"].dram / v.unfused_ms for v in views if v.unfused_ms]
        text += (f" Against U (middle panel) the plan is {_range(u_plan)} "
                 f"({_kind(v.source for v in views)}; {_verdict(u_plan, theirs)}) and DRAM is "
                 f"{_range(u_dram, '{:.0%}')} of U.")
    else:
        text += " The paper's own comparison (against U) cannot be drawn from this database."
    return text


def draw_fig7(data, found, outdir):
    fig, (ax, axu, axp) = _panels(3, 12.5, 2.6)
    notes = Footnotes()
    frameworks = sorted({f for m in data.values() if m for f in m.baselines})
    runs, sources, ticklabels = [], [], []
    for name, m in data.items():
        label = ref.FIG7.get(name, {}).get("label", name)
        if m is None:
            ticklabels.append(f"{label}\n(no run)")
        else:
            runs.append(m.run)
            sources.append(m.source)
            ticklabels.append(f"{label}\nb{m.run.batch} {m.run.precision}")

    def panel(axis, slots, bars_of, paper_of):
        """Bars (DRAM hatched \\\\, the rest ////) normalized per model; returns tops."""
        width = 0.8 / max(len(slots), 4)
        tops = []
        for i, name in enumerate(data):
            bars = bars_of(name)
            if isinstance(bars, str):
                _missing_tag(axis, i, bars, notes)
                continue
            for j, slot in enumerate(slots):
                x = i + (j - (len(slots) - 1) / 2) * width
                b = bars.get(slot)
                if b is None:
                    continue
                color = COLORS.get(slot, "#cccccc")
                if isinstance(b, fd.Breakdown):
                    axis.bar(x, b.dram, width, color=color, edgecolor="black",
                             linewidth=0.5, hatch="\\\\\\")
                    axis.bar(x, b.total - b.dram, width, bottom=b.dram, color=color,
                             edgecolor="black", linewidth=0.5, hatch="////", alpha=0.55)
                    top, source = b.total, b.source
                else:  # a framework baseline: (normalized, source)
                    top, source = b
                    axis.bar(x, top, width, color=color, edgecolor="black", linewidth=0.5)
                pv = paper_of(name, slot)
                if pv is not None:
                    axis.plot([x], [pv], **DIAMOND)
                tops.append((x, top))
                _source_tag(axis, x, source)
        axis.set_xticks(range(len(data)), ticklabels, fontsize=8)
        axis.set_xlim(-0.6, len(data) - 0.4)
        return tops

    def paper_value(name, slot):
        paper = ref.FIG7.get(name)
        if not paper:
            return None
        if slot == "plan":
            return paper["brickdl_memory"] + paper["brickdl_compute"]
        key = ref.FIG7_FRAMEWORK_PAPER_KEY.get(slot)
        return paper[key] if key else None

    def slot_patches(slots):
        text = {"layerwise": "L: layerwise, cuDNN fused\n(library kernels)",
                "unfused": "U: the paper's unfused\ncuDNN", "plan": "BrickDL plan"}
        return [Patch(facecolor=COLORS.get(s, "#cccccc"), edgecolor="black",
                      label=text.get(s, f"{s} (framework)")) for s in slots]

    hatches = [Patch(facecolor="white", edgecolor="black", hatch="\\\\\\",
                     label="Memory (DRAM)"),
               Patch(facecolor="white", edgecolor="black", hatch="////",
                     label="Compute & Other")]

    # (a) the honest comparison: normalized to L.
    slots = ["layerwise", "plan"] + frameworks

    def honest(name):
        m = data[name]
        if m is None:
            return {}
        bars = {"layerwise": m.layerwise, "plan": m.plan}
        bars.update({f: (b["normalized"], fd.SOURCE_GPU) for f, b in m.baselines.items()})
        return bars

    tops = panel(ax, slots, honest, paper_value)
    _hline(ax, 1.0, "layerwise")
    ax.set_ylabel("Normalized time\n(L = 1, lower is better)")
    ax.set_title("ours against L, the honest comparison (normalized to our fused layerwise "
                 "baseline)", fontsize=9, loc="left")
    _side_legend(ax, slot_patches(slots) + hatches + [
        _line_entry("layerwise", "L = 1"),
        _diamond_entry(PAPER_VALUE_NOT_L)])
    _y_limit(ax, tops, 1.05, 3.0)
    if not runs:
        _no_data(ax, "no run of the seven model experiments (or of their models under another "
                     "name) in this database")

    # (b) the paper's comparison reproduced: normalized to U.
    views = {n: m.against_unfused for n, m in data.items() if m and m.against_unfused}
    uframeworks = sorted({f for v in views.values() for f in v.baselines})
    uslots = ["unfused", "layerwise", "plan"] + uframeworks

    def against_u(name):
        m = data[name]
        if m is None:
            return {}
        if m.against_unfused is None:
            return m.unfused_missing or "no comparison against U"
        v = m.against_unfused
        bars = dict(v.normalized)
        bars.update({f: (b["normalized"], fd.SOURCE_GPU) for f, b in v.baselines.items()})
        return bars

    missing = sorted({m.unfused_missing for m in data.values()
                      if m and not m.against_unfused and m.unfused_missing})
    if views:
        tops = panel(axu, uslots, against_u, paper_value)
        _hline(axu, 1.0, "unfused")
        _y_limit(axu, tops, 1.05, 3.0)
        _side_legend(axu, slot_patches(uslots) + hatches + [
            _line_entry("unfused", "U = 1"),
            _diamond_entry(f"paper's value ({ref.GPU}),\nnormalized to its cuDNN")])
    else:
        _no_data(axu, missing[0] if missing else "no run to compare against U")
    axu.set_ylabel("Normalized time\n(U = 1, lower is better)")
    axu.set_title("ours against U, the paper's comparison reproduced (normalized to the paper's "
                  "unfused cuDNN baseline)", fontsize=9, loc="left")

    # (c) the paper's panel.
    pslots = ["cudnn", "brickdl", "torchscript", "xla"]
    pcolors = {"cudnn": COLORS["layerwise"], "brickdl": COLORS["plan"],
               "torchscript": COLORS["torch-compile"], "xla": COLORS["jax-xla"]}
    pw = 0.8 / len(pslots)
    for i, name in enumerate(data):
        paper = ref.FIG7.get(name)
        if not paper:
            continue
        for j, slot in enumerate(pslots):
            x = i + (j - (len(pslots) - 1) / 2) * pw
            if slot in ("cudnn", "brickdl"):
                mem, comp = paper[f"{slot}_memory"], paper[f"{slot}_compute"]
                axp.bar(x, mem, pw, color=pcolors[slot], edgecolor="black", linewidth=0.5,
                        hatch="\\\\\\")
                axp.bar(x, comp, pw, bottom=mem, color=pcolors[slot], edgecolor="black",
                        linewidth=0.5, hatch="////", alpha=0.55)
            else:
                axp.bar(x, paper[slot], pw, color=pcolors[slot], edgecolor="black",
                        linewidth=0.5)
    _hline(axp, 1.0, "cudnn")
    axp.set_ylim(0, 1.35)
    axp.set_xticks(range(len(data)), [ref.FIG7.get(n, {}).get("label", n) for n in data],
                   fontsize=8)
    axp.set_xlim(-0.6, len(data) - 0.4)
    axp.set_ylabel("Normalized time\n(cuDNN = 1)")
    axp.set_title(PAPER_TITLE, fontsize=9, loc="left")
    _side_legend(axp, [Patch(facecolor=pcolors[s], edgecolor="black", label=lab) for s, lab in
                       (("cudnn", "cuDNN (the paper's,\nunfused: U)"), ("brickdl", "BrickDL"),
                        ("torchscript", "TorchScript"), ("xla", "TensorFlow XLA"))]
                  + hatches + [_line_entry("cudnn", "cuDNN = 1")])

    shown = {n: (m.run if m else None) for n, m in data.items()}
    fig_notes = [f"{n}: {t}" for n, m in data.items() if m for t in m.notes]
    fig_notes += [f"{n}: {v.note}; the comparison against U is predicted"
                  for n, v in views.items() if v.note]
    subtitle = _subtitle(
        _runs_line(runs, sources + [v.source for v in views.values()]),
        *found.describe(shown),
        *_baseline_lines(),
        _fig7_note(data), SPLIT_NOTE,
        ("notes: " + "; ".join(fig_notes)) if fig_notes else "")
    return _finish(fig, outdir, FIGURES["fig7"],
                   "Fig 7 - End-to-end model inference time, against both layerwise baselines",
                   subtitle, notes)


# ---- Figs 8 and 9: the subgraphs -------------------------------------------------------------

def _paper_subgraph_index(label):
    """'subgraph 3' -> 2: the paper's subgraph our labelled group stands for, or None."""
    numbers = re.findall(r"\d+", label)
    if numbers and 1 <= int(numbers[-1]) <= len(ref.FIG8):
        return int(numbers[-1]) - 1
    return None


def _group_axis(ax, centers, xs, letters, group_labels, step):
    ax.set_xticks(xs, letters, fontsize=8, fontweight="bold")
    for c, lab in zip(centers, group_labels):
        ax.text(c, -0.09, lab, ha="center", va="top", transform=ax.get_xaxis_transform(),
                fontsize=8)
    for c in centers[:-1]:
        _separator(ax, c + step / 2)
    if xs:
        ax.set_xlim(min(xs) - 0.8, max(xs) + 0.8)


def _pairs_panel(ax, groups, slots, notes, step=1.0):
    """Normalized M | C bar pairs: groups [(label, {slot: (memory, compute, source) | reason
    | None}, {slot: the paper's value, a diamond})]. Returns tops."""
    width = 0.3
    pitch = (len(slots) + 0.5) * step
    centers, xs, letters, tops = [], [], [], []
    for i, (label, bars, paper) in enumerate(groups):
        base = i * pitch
        centers.append(base + (len(slots) - 1) * step / 2)
        for j, s in enumerate(slots):
            x = base + j * step
            xs.append(x)
            letters.append(LETTER[s])
            b = bars.get(s)
            if isinstance(b, str):
                _missing_tag(ax, x, b, notes)
                continue
            if b is None:
                continue
            tops.append((x, _mc_pair(ax, x, width, b[0], b[1])))
            if b[2]:
                _source_tag(ax, x, b[2])
            if paper.get(s) is not None:
                ax.plot([x], [paper[s]], **DIAMOND)
    _group_axis(ax, centers, xs, letters, [g[0] for g in groups], pitch)
    return tops


def _parts(b):
    return (b.memory_side, b.compute_side, b.source)


def _paper_parts(bar):
    return ({k: bar[k] for k in MEMORY_KEYS}, {k: bar[k] for k in COMPUTE_KEYS}, None)


def _subgraphs_note(subgraphs):
    """Fig 8's model vs paper: our P / M against L and U, the paper's against its cuDNN."""
    ours, against_u, theirs, kinds, ukinds = [], [], [], [], []
    l_dram = [sg.normalized["layerwise"].dram for sg in subgraphs if sg.normalized["layerwise"]]
    p_dram = [sub["cudnn"]["dram"] for sub in ref.FIG8]
    for sg in subgraphs:
        k = _paper_subgraph_index(sg.label)
        for s in fd.FUSED:
            b = sg.normalized.get(s)
            if b is not None:
                ours.append(b.total)
                kinds.append(b.source)
            if sg.against_unfused and sg.against_unfused.normalized.get(s) is not None:
                against_u.append(sg.against_unfused.normalized[s].total)
                ukinds.append(sg.against_unfused.source)
            if k is not None:
                theirs.append(ref.memory_side(ref.FIG8[k][s]))
    if not ours:
        return ""
    text = (f"model vs paper: our P and M are {_range(ours)} of L ({_kind(kinds)}; "
            f"{_verdict(ours, theirs)} {_range(theirs)} of its cuDNN). Why: the paper's "
            f"cuDNN is U, unfused (its passes re-read and re-write every output: DRAM is "
            f"{_range(p_dram, '{:.0%}')} of its time, {_range(l_dram, '{:.0%}')} of L's), "
            "while L is fused and charged at the library's roofline.")
    if against_u:
        text += (f" Against U (middle panel) P and M are {_range(against_u)} ({_kind(ukinds)}; "
                 f"{_verdict(against_u, theirs)}).")
    else:
        text += " The paper's own comparison (against U) cannot be drawn from this database."
    return text


def draw_fig8(run, found, subgraphs, outdir):
    fig, (ax, axu, axp) = _panels(3, 13, 2.6)
    notes = Footnotes()

    def paper_of(sg):
        k = _paper_subgraph_index(sg.label)
        return {} if k is None else {s: ref.memory_side(ref.FIG8[k][s]) for s in fd.FUSED}

    # (a) against L.
    groups = []
    for sg in subgraphs:
        bars = {s: (_parts(b) if b else sg.missing.get(s, "no layerwise time for every layer"))
                for s, b in sg.normalized.items()}
        groups.append((sg.label, bars, paper_of(sg)))
    if subgraphs:
        tops = _pairs_panel(ax, groups, ("layerwise", "padded", "memoized"), notes)
        _hline(ax, 1.0, "layerwise")
        _y_limit(ax, tops, 1.15, 3.0)
    else:
        _no_data(ax, f"no labelled subgraphs: no run of experiment '{fd.FIG8_EXPERIMENT}' "
                     "(nor a ResNet-50 run with groups labelled 'subgraph N') in this database")
    ax.set_ylabel("Normalized time\n(L = 1)")
    ax.set_title("ours against L, the honest comparison (L = layerwise, cuDNN fused; P = "
                 "padded, M = memoized; each an M | C bar pair)", fontsize=9, loc="left")
    _side_legend(ax, _breakdown_handles() + [
        _line_entry("layerwise", "L = 1"),
        _diamond_entry(PAPER_VALUE_NOT_L)])

    # (b) against U.
    ugroups, missing = [], []
    for sg in subgraphs:
        v = sg.against_unfused
        if v is None:
            missing.append(sg.unfused_missing)
            ugroups.append((sg.label, {"unfused": sg.unfused_missing}, {}))
            continue
        bars = {}
        for s, b in v.normalized.items():
            bars[s] = _parts(b) if b else sg.missing.get(s, "no bar")
        ugroups.append((sg.label, bars, paper_of(sg)))
    if subgraphs and len(missing) < len(subgraphs):
        tops = _pairs_panel(axu, ugroups, ("unfused", "layerwise", "padded", "memoized"), notes)
        _hline(axu, 1.0, "unfused")
        _y_limit(axu, tops, 1.15, 3.0)
        _side_legend(axu, _breakdown_handles() + [
            _line_entry("unfused", "U = 1"),
            _diamond_entry(f"paper's value ({ref.GPU}),\nnormalized to its cuDNN")])
    else:
        _no_data(axu, missing[0] if missing and missing[0] else "no subgraphs to compare "
                 "against U")
    axu.set_ylabel("Normalized time\n(U = 1)")
    axu.set_title("ours against U, the paper's comparison reproduced (U = the paper's unfused "
                  "cuDNN, L = ours fused, P, M)", fontsize=9, loc="left")

    # (c) the paper.
    pgroups = [(f"Subgraph {i + 1}", {k: _paper_parts(sub[k]) for k in ("cudnn", "padded",
                                                                       "memoized")}, {})
               for i, sub in enumerate(ref.FIG8)]
    _pairs_panel(axp, pgroups, ("cudnn", "padded", "memoized"), notes)
    _hline(axp, 1.0, "cudnn")
    axp.set_ylim(0, 1.2)
    axp.set_ylabel("Normalized time\n(cuDNN = 1)")
    axp.set_title(PAPER_TITLE + " (C = cuDNN, P = padded, M = memoized)", fontsize=9,
                  loc="left")
    _side_legend(axp, _breakdown_handles() + [_line_entry("cudnn", "cuDNN (the paper's,\n"
                                                                    "unfused: U) = 1")])

    sources = [sg.source for sg in subgraphs] + [sg.against_unfused.source for sg in subgraphs
                                                 if sg.against_unfused]
    unotes = sorted({f"{sg.label}: {sg.against_unfused.note}; its comparison against U is "
                     "predicted"
                     for sg in subgraphs if sg.against_unfused and sg.against_unfused.note})
    subtitle = _subtitle(
        _runs_line([run] if run else [], sources),
        *found.describe({"fig8": run}),
        *_baseline_lines(),
        _subgraphs_note(subgraphs), SPLIT_NOTE, "; ".join(unotes),
        ("subgraphs: " + "; ".join(f"{sg.label} = {sg.layer_names}" for sg in subgraphs))
        if subgraphs else "")
    return _finish(fig, outdir, FIGURES["fig8"],
                   "Fig 8 - ResNet-50 subgraphs: layerwise vs best padded vs best memoized",
                   subtitle, notes)


FIG9_CAP = 2.6  # Fig 9's linear axis ends here (the paper's: 1.6); longer bars are cut


def _fig9_note(subgraphs):
    ours = {k: [r[k] for sg in subgraphs for r in sg.ratios.values()] for k in range(3)}
    theirs = {k: [sub[s][k] for sub in ref.FIG9 for s in fd.FUSED] for k in range(3)}
    if not ours[0]:
        return ""
    text = (f"model vs paper: relative to L, our P and M move L1 x{_range(ours[0])}, L2 "
            f"x{_range(ours[1])}, DRAM x{_range(ours[2])}; the paper's (relative to its "
            f"cuDNN): L1 x{_range(theirs[0])}, L2 x{_range(theirs[1])}, DRAM "
            f"x{_range(theirs[2])}. Why: the model counts a merged kernel's weight re-reads per "
            "unit of work (model/detail/memory.h), and U's extra passes over every output add "
            "to the paper's denominator.")
    u = {k: [r[k] for sg in subgraphs for r in sg.unfused_ratios.values()] for k in range(3)}
    if u[0]:
        text += (f" Relative to U (middle panel, model): L1 x{_range(u[0])}, L2 "
                 f"x{_range(u[1])}, DRAM x{_range(u[2])}.")
    return text


def draw_fig9(run, found, subgraphs, outdir):
    fig, (ax, axu, axp) = _panels(3, 13, 2.5)
    width = 0.25
    kinds = (("l1", "Global (L1)"), ("l2", "L2"), ("dram_tx", "DRAM"))

    def panel(axis, rows, paper_rows):
        centers, xs, letters, tops = [], [], [], []
        for i, ratios in enumerate(rows):
            base = i * 2.6
            centers.append(base + 0.5)
            for j, s in enumerate(fd.FUSED):
                x0 = base + j * 1.0
                xs.append(x0)
                letters.append(LETTER[s])
                r = ratios.get(s)
                for k in range(len(kinds)):
                    x = x0 + (k - 1) * width
                    if r is not None:
                        axis.bar(x, r[k], width, color=COLORS[kinds[k][0]], edgecolor="black",
                                 linewidth=0.4)
                        tops.append((x, r[k]))
                    if paper_rows is not None and paper_rows[i] is not None:
                        axis.plot([x], [paper_rows[i][s][k]], **DIAMOND)
        return centers, xs, letters, tops

    def ours_panel(axis, rows, baseline, source_of, title):
        paper_for_ours = [ref.FIG9[k] if k is not None else None
                          for k in (_paper_subgraph_index(sg.label) for sg in subgraphs)]
        centers, xs, letters, tops = panel(axis, rows, paper_for_ours)
        _group_axis(axis, centers, xs, letters, [sg.label for sg in subgraphs], 2.6)
        _hline(axis, 1.0, baseline)
        for i, sg in enumerate(subgraphs):
            _source_tag(axis, i * 2.6 + 0.5, source_of(sg))
        cut = _y_limit(axis, tops, 1.4, FIG9_CAP)
        axis.set_title(title + (f"; linear axis as the paper's, cut at {FIG9_CAP}: a cut bar's "
                                "value is written on it" if cut else "; linear axis as the "
                                "paper's"), fontsize=9, loc="left")
        letter = LETTER[baseline]
        _side_legend(axis, [Patch(facecolor=COLORS[k], edgecolor="black",
                                  label=f"{lab} transactions") for k, lab in kinds]
                     + [_line_entry(baseline, f"{letter} = 1"),
                        _diamond_entry(f"paper's value ({ref.GPU}),\nrelative to its cuDNN")])

    if subgraphs:
        ours_panel(ax, [sg.ratios for sg in subgraphs], "layerwise",
                   lambda sg: "GPU counters" if "GPU" in sg.bytes_source else "model",
                   "ours relative to L (P = padded, M = memoized)")
    else:
        _no_data(ax, f"no labelled subgraphs: no run of experiment '{fd.FIG8_EXPERIMENT}'")
        ax.set_title("ours relative to L", fontsize=9, loc="left")
    ax.set_ylabel("Transactions\nrelative to L")
    umissing = sorted({sg.unfused_missing for sg in subgraphs if not sg.unfused_ratios
                       and sg.unfused_missing})
    if any(sg.unfused_ratios for sg in subgraphs):
        ours_panel(axu, [sg.unfused_ratios for sg in subgraphs], "unfused",
                   lambda sg: "model", "ours relative to U, predicted (U has no counters)")
    else:
        _no_data(axu, umissing[0] if umissing else "no subgraphs to compare against U")
        axu.set_title("ours relative to U", fontsize=9, loc="left")
    axu.set_ylabel("Transactions\nrelative to U")

    paper_rows = [{s: p[s] for s in fd.FUSED} for p in ref.FIG9]
    centers, xs, letters, _ = panel(axp, paper_rows, None)
    _group_axis(axp, centers, xs, letters, [f"Subgraph {i + 1}" for i in range(len(ref.FIG9))],
                2.6)
    _hline(axp, 1.0, "cudnn")
    axp.set_ylim(0, 1.6)
    axp.set_ylabel("Transactions\nrelative to cuDNN")
    axp.set_title(PAPER_TITLE, fontsize=9, loc="left")
    _side_legend(axp, [Patch(facecolor=COLORS[k], edgecolor="black", label=f"{lab} "
                             "transactions") for k, lab in kinds]
                 + [_line_entry("cudnn", "cuDNN (the paper's,\nunfused: U) = 1")])
    byte_sources = sorted({sg.bytes_source for sg in subgraphs})
    subtitle = _subtitle(
        _runs_line([run] if run else [], byte_sources), *found.describe({"fig8": run}),
        *_baseline_lines(),
        _fig9_note(subgraphs),
        "L1 = bytes the kernels issue to global memory, L2 = bytes reaching L2, DRAM = bytes "
        "reaching DRAM (read + write); GPU counters: l1tex__t_bytes.sum, lts__t_bytes.sum, "
        "dram__bytes_read.sum + dram__bytes_write.sum")
    return _finish(fig, outdir, FIGURES["fig9"],
                   "Fig 9 - ResNet-50 subgraphs: data movement relative to each baseline",
                   subtitle)


# ---- Figs 10 and 11 ------------------------------------------------------------------------

def _bar_or_why(ax, x, width, parts, notes):
    """One M | C bar pair at x from `parts` (memory, compute, source tag); a text `parts` is why
    there is no bar (footnoted), None no bar at all. Returns the pair's top, or None."""
    if isinstance(parts, str):
        _missing_tag(ax, x, parts, notes)
        return None
    if parts is None:
        return None
    top = _mc_pair(ax, x, width, parts[0], parts[1])
    if parts[2]:
        _source_tag(ax, x, parts[2])
    return top


def _absolute_panel(ax, baselines, groups, notes):
    """Absolute M | C bar pairs. baselines [(key, tick label, (memory, compute, source) |
    reason | None)]: a bar pair each, and a line at its total; groups [(label, {strategy:
    parts | reason})]. Returns the keys of the lines drawn."""
    width = 0.32
    xs, letters, centers, top, lines = [], [], [], 0.0, []
    for i, (key, label, parts) in enumerate(baselines):
        x = i * 1.1
        xs.append(x)
        letters.append(f"M  C\n{label}")
        bar_top = _bar_or_why(ax, x, width, parts, notes)
        if bar_top is None:
            continue
        top = max(top, bar_top)
        _hline(ax, sum(parts[0].values()), key)
        lines.append(key)
    start = (len(baselines) - 1) * 1.1 + 1.5
    for i, (label, bars) in enumerate(groups):
        base = start + i * 2.2
        centers.append(base + 0.5)
        for j, s in enumerate(fd.FUSED):
            x = base + j
            xs.append(x)
            letters.append(f"M  C\n{s.capitalize()}")
            bar_top = _bar_or_why(ax, x, width, bars.get(s), notes)
            if bar_top is not None:
                top = max(top, bar_top)
    ax.set_xticks(xs, letters, fontsize=7)
    ax.set_xlim(min(xs) - 0.8, max(xs) + 0.8)
    for c, (label, _) in zip(centers, groups):
        ax.text(c, -0.2, label, ha="center", va="top", transform=ax.get_xaxis_transform(),
                fontsize=9, fontweight="bold")
    for c in centers:
        _separator(ax, c - 1.1)
    ax.set_ylim(0, top * 1.1 if top > 0 else 1)
    return lines


def _micro_legend(ax, lines):
    entries = {"layerwise": "L: layerwise, cuDNN fused",
               "unfused": "U: the paper's unfused cuDNN",
               "cudnn": "cuDNN (the paper's,\nunfused: U)"}
    _side_legend(ax, _breakdown_handles() + [_line_entry(k, entries[k]) for k in lines])


def _micro_title(data, paper_edge, what):
    shape = data.shape
    size = "x".join(map(str, shape)) if shape else f"size unknown (the paper: {paper_edge}^3)"
    if shape and all(x == paper_edge for x in shape):
        size += " (the paper's size)"
    elif shape:
        size += f" (reduced; the paper: {paper_edge}^3)"
    kind = ("model" if data.source == fd.SOURCE_MODEL
            else fd.SOURCE_SHORT.get(data.source, data.source))
    return (f"ours, {kind}, {data.run.gpu_spec} model spec, {size} · {what}")


def _baselines_of(data):
    u = _parts(data.unfused) if data.unfused else (data.unfused_missing or "no U")
    return [("layerwise", "L", _parts(data.layerwise) if data.layerwise else
             "no layerwise candidate for every layer"), ("unfused", "U", u)]


def _micro_note(panels, ours_of, paper_values):
    """Figs 10-11: per panel, the fused bars against L and U, the paper's against cuDNN."""
    parts = []
    for data in panels:
        if data is None or data.layerwise is None:
            continue
        totals = ours_of(data)
        kind = "model" if data.source == fd.SOURCE_MODEL else fd.SOURCE_SHORT[data.source]
        size = " " + "x".join(map(str, data.shape)) if data.shape else ""
        text = f"{kind}{size}: {_range([t / data.layerwise.total for t in totals])} of L"
        if data.unfused is not None:
            text += f", {_range([t / data.unfused.total for t in totals])} of U"
        parts.append(text)
    if not parts:
        return ""
    text = ("model vs paper: ours P / M " + "; ".join(parts) + f"; the paper's "
            f"{_range(paper_values)} of its cuDNN (absolute times differ: another size, "
            "device or the model). Why they differ: the paper's cuDNN is U, unfused, while L is "
            "fused and charged at the library's roofline")
    if not any(d is not None and d.unfused is not None for d in panels):
        return text + "; U is not in this database (footnotes), so only L can be compared."
    return text + "."


def _micro_figure(panels, paper_panel, name, title, experiment, what_of, groups_of,
                  ours_totals, paper_values, outdir, found, key):
    n_ours = max(len(panels), 1)
    fig, axes = _panels(n_ours + 1, 12.5, 2.6, gap_in=1.45)
    notes = Footnotes()
    runs, sources = [], []
    for ax, data in zip(axes, panels or [None]):
        if data is None or not groups_of(data):
            _no_data(ax, f"no run of experiment '{experiment}' (nor of its model under another "
                         "name) with groups in this database")
            ax.set_title("ours", fontsize=9, loc="left")
        else:
            runs.append(data.run)
            sources.append(data.source)
            lines = _absolute_panel(ax, _baselines_of(data), groups_of(data), notes)
            _micro_legend(ax, lines)
            ax.set_title(_micro_title(data, paper_panel[3], what_of(data)), fontsize=9,
                         loc="left")
        ax.set_ylabel("Total execution time (ms)")
    axp = axes[-1]
    lines = _absolute_panel(axp, [("cudnn", "cuDNN", _paper_parts(paper_panel[0]))],
                            paper_panel[1], notes)
    _micro_legend(axp, lines)
    axp.set_ylabel("Total execution time (ms)")
    axp.set_title(paper_panel[2], fontsize=9, loc="left")
    shown = {f"{key} {'model' if r.backend == 'none' else 'measured'}": r for r in runs}
    found_lines = found.describe(shown)
    if len(shown) > 1:
        found_lines.append("panels: " + "; ".join(f"{k} = run {r.id}" for k, r in
                                                  shown.items()))
    subtitle = _subtitle(
        _runs_line(runs, sources), *found_lines,
        *_baseline_lines(),
        _micro_note(panels, ours_totals, paper_values), SPLIT_NOTE,
        "; ".join(f"notes: {t}" for d in panels if d for t in d.notes))
    return _finish(fig, outdir, name, title, subtitle, notes)


def draw_fig10(panels, found, outdir):
    def groups_of(data):
        return [(" + ".join(p.name.split("+")),
                 {**p.missing, **{s: _parts(b) for s, b in p.bars.items()}})
                for p in data.partitions]

    paper_groups = [(" + ".join(n.split("+")), {s: _paper_parts(ref.FIG10[n][s])
                                                for s in fd.FUSED}) for n in ref.FIG10_ORDER]
    paper = (ref.FIG10_CUDNN, paper_groups, PAPER_TITLE + f", {ref.FIG10_EDGE}^3 x 3 "
             "channels, batch 1", ref.FIG10_EDGE)
    return _micro_figure(
        [d for d in panels if d is not None and d.partitions], paper, FIGURES["fig10"],
        "Fig 10 - 6-layer 3-D conv chain: partitions x padded / memoized vs both baselines",
        fd.FIG10_EXPERIMENT, lambda d: f"each layer: {d.first_layer}", groups_of,
        lambda d: [b.total for p in d.partitions for b in p.bars.values()],
        [ref.memory_side(b) / ref.memory_side(ref.FIG10_CUDNN) for bars in ref.FIG10.values()
         for b in bars.values()], outdir, found, "fig10")


def draw_fig11(panels, found, outdir):
    def groups_of(data):
        groups = []
        for e in sorted(set(data.bricks) | set(data.missing)):
            parts = {s: _parts(b) for s, b in data.bricks.get(e, {}).items()}
            parts.update(data.missing.get(e, {}))
            groups.append(("x".join([str(e)] * data.dims) + " brick", parts))
        return groups

    paper_groups = [(f"{e}x{e}x{e} brick", {s: _paper_parts(ref.FIG11[e][s]) for s in fd.FUSED})
                    for e in sorted(ref.FIG11)]
    paper = (ref.FIG11_CUDNN, paper_groups, PAPER_TITLE + f", 3-layer chain on "
             f"{ref.FIG11_EDGE}^3", ref.FIG11_EDGE)
    return _micro_figure(
        [d for d in panels if d is not None and d.layerwise is not None], paper,
        FIGURES["fig11"],
        "Fig 11 - 3-layer 3-D conv chain: brick size x padded / memoized vs both baselines",
        fd.FIG11_EXPERIMENT,
        lambda d: f"group: {d.group[2]}; each layer: {d.first_layer}", groups_of,
        lambda d: [b.total for bars in d.bricks.values() for b in bars.values()],
        [ref.memory_side(b) / ref.memory_side(ref.FIG11_CUDNN) for bars in ref.FIG11.values()
         for b in bars.values()], outdir, found, "fig11")


# ---- Fig 12 ----------------------------------------------------------------------------------

def _stats_text(stats, scale_note=""):
    def f(v, fmt):
        return "n/a" if v is None else format(v, fmt)
    return (f"n = {stats['n']}\nmedian |rel. err| = {f(stats['median_rel_error'], '.1%')}\n"
            f"worst |rel. err| = {f(stats['worst_rel_error'], '.1%')}\n"
            f"Spearman rho = {f(stats['spearman'], '.3f')}{scale_note}")


def fig12_stats(points):
    """{target: {"time": stats, "bytes": stats, "bytes_kind": ...}} for figures.json."""
    out = {}
    for target in sorted({p.target for p in points}):
        pts = [p for p in points if p.target == target]
        bpts = [p for p in pts if p.measured_bytes is not None]
        out[target] = {
            "backend": pts[0].backend,
            "time": fd.accuracy_stats([p.predicted_ms for p in pts],
                                      [p.measured_ms for p in pts]),
            "bytes": fd.accuracy_stats([p.predicted_bytes for p in bpts],
                                       [p.measured_bytes for p in bpts]),
            "bytes_kind": bpts[0].bytes_kind if bpts else None,
        }
    return out


FIG12_AXES_IN = 4.6   # height of Fig 12's axes
FIG12_BLOCK_IN = 0.8  # height of one target's statistics under them (6 lines)


def draw_fig12(points, outdir):
    fig, axes = _panels(1, 12, FIG12_AXES_IN, ncols=2)
    stats = fig12_stats(points)
    blocks = 0
    markers = {"padded": "o", "memoized": "s", "layerwise": "^"}
    palette = ["#2e6fbd", "#d00000", "#00a050", "#ff9900", "#7030a0"]
    for ax, key in zip(axes, ("time", "bytes")):
        lo, hi = float("inf"), 0.0
        texts = []
        for ti, target in enumerate(stats):
            color = palette[ti % len(palette)]
            pts = [p for p in points if p.target == target]
            for strat, mk in markers.items():
                sel = [p for p in pts if p.strategy == strat]
                if key == "time":
                    xy = [(p.predicted_ms, p.measured_ms) for p in sel]
                else:
                    xy = [(p.predicted_bytes, p.measured_bytes) for p in sel
                          if p.measured_bytes is not None]
                xy = [(a, b) for a, b in xy if a and b and a > 0 and b > 0]
                if not xy:
                    continue
                ax.scatter([a for a, _ in xy], [b for _, b in xy], s=14, marker=mk,
                           color=color, alpha=0.7, label=f"{target[:48]} · {strat}")
                lo = min([lo] + [v for pair in xy for v in pair])
                hi = max([hi] + [v for pair in xy for v in pair])
            s = stats[target][key]
            if s["n"]:
                note = ""
                if stats[target]["backend"] != "cuda" and key == "time":
                    note = "\n(CPU times vs the GPU model: compare ranks, not values)"
                kind = "" if key == "time" else f" [{stats[target]['bytes_kind']}]"
                texts.append((color, f"{target[:44]}{kind}\n" + _stats_text(s, note)))
        if hi > 0:
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8, linestyle="--",
                    label="y = x")
            ax.set_xlim(lo / 1.5, hi * 1.5)
            ax.set_ylim(lo / 1.5, hi * 1.5)
            ax.legend(fontsize=6, loc="lower right")
        else:
            _no_data(ax, "no measured candidate with a prediction in this database")
        # Statistics under the axes, one block per target, one under the other.
        for k, (color, t) in enumerate(texts):
            ax.text(0.0, -0.14 - k * FIG12_BLOCK_IN / FIG12_AXES_IN, t, transform=ax.transAxes,
                    va="top", fontsize=6.5, color=color, family="monospace")
        blocks = max(blocks, len(texts))
        if key == "time":
            ax.set_xlabel("predicted time (ms)")
            ax.set_ylabel("measured time, median (ms)")
            ax.set_title("time", fontsize=9)
        else:
            ax.set_xlabel("predicted bytes")
            ax.set_ylabel("measured bytes")
            ax.set_title("bytes: GPU = DRAM read + write (counters) vs predicted DRAM;\n"
                         "CPU = loads + stores issued (executor) vs predicted L1", fontsize=8)
    runs_note = ("every candidate with an ok measurement (latest per candidate and target) "
                 "and a prediction for its run's GPU spec; relative error = |predicted - "
                 "measured| / measured; no paper counterpart (beyond the paper)")
    return _finish(fig, outdir, FIGURES["fig12"],
                   "Fig 12 (beyond the paper) - model vs measurement", runs_note, right=0.98,
                   bottom_in=0.9 + FIG12_BLOCK_IN * max(blocks, 1))


# ---- model vs paper --------------------------------------------------------------------------

def versus_preamble(db):
    return [
        f"Database: {os.path.basename(db)}. Each row is one bar of a figure: **paper** is the "
        f"paper's value ({ref.GPU}, {ref.SOURCE}) normalized to its own cuDNN baseline; "
        "**ours ÷ L** is ours against our fused layerwise baseline (the honest comparison); "
        "**ours ÷ U** against the paper's unfused cuDNN baseline (the paper's comparison "
        "reproduced); **ours ÷ U − paper** how far ours comes to the paper on the paper's "
        "terms. Each of ours says what it is: `model` = predicted, `CPU` / `GPU` = measured; "
        "the two comparisons of one bar may differ in kind (the CPU backend never measures U).",
        "",
        "- " + BASELINE_TEXT["layerwise"],
        "- " + BASELINE_TEXT["unfused"],
        "- The paper's cuDNN bar can be read as either of ours: both readings are given "
        "('read as L', 'read as U').",
        f"- Fig 10's cuDNN bar is {ref.memory_side(ref.FIG10_CUDNN):g} ms (the artifact's "
        "component rows and the paper's text); the artifact's Total row, shifted by one bar, "
        f"reads {ref.FIG10_CUDNN_TOTAL_ROW:g}: against that every Fig 10 paper value would be "
        f"{ref.memory_side(ref.FIG10_CUDNN) / ref.FIG10_CUDNN_TOTAL_ROW - 1:.1%} higher.",
    ]


def _versus_title(fig, runs):
    described = "; ".join(f"run {r.id} '{r.experiment}', {r.describe()}" for r in runs if r)
    return f"{fig}" + (f": {described}" if described else "")


# ---- driver ---------------------------------------------------------------------------------

def _jsonable(obj):
    if isinstance(obj, fd.Breakdown):
        return obj.as_dict()
    if isinstance(obj, fd.CandidateResult):
        return {"candidate_id": obj.id, "config": obj.describe(), "predicted_ms":
                obj.prediction["time_ms"] if obj.prediction else None,
                "measured_ms": obj.measured_ms}
    if isinstance(obj, fd.Run):
        return {"run_id": obj.id, "experiment": obj.experiment, "model": obj.model,
                "target": obj.target, "backend": obj.backend, "gpu_spec": obj.gpu_spec,
                "batch": obj.batch,
                "precision": obj.precision, "status": obj.status,
                "overrides": obj.overrides}
    if isinstance(obj, fd.AgainstUnfused):
        return {"source": obj.source, "bars": _jsonable(obj.bars),
                "normalized": _jsonable(obj.normalized), "note": obj.note,
                "baselines": _jsonable(obj.baselines)}
    if isinstance(obj, fd.VersusRow):
        d = {k: getattr(obj, k) for k in obj.__dataclass_fields__}
        d["gap"] = obj.gap
        return d
    if isinstance(obj, fd.FoundRuns):
        return {"config": list(obj.config) if obj.config else None,
                "other_configs": [list(c) for c in obj.other_configs],
                "runs": {k: [r.id for r in rs] for k, rs in obj.runs.items()}}
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if hasattr(obj, "__dataclass_fields__"):
        return {k: _jsonable(getattr(obj, k)) for k in obj.__dataclass_fields__}
    return obj


def make_figures(db, outdir, target_prefix=None, only=None, run_filter=None):
    """Draws the figures; returns ({figure: [paths]}, summary dict). `run_filter` (a
    figdata.RunFilter) restricts the runs; `target_prefix` alone is its --target."""
    os.makedirs(outdir, exist_ok=True)
    flt = run_filter or fd.RunFilter(target_prefix=target_prefix)
    conn = fd.open_db(db)
    wanted = set(only or FIGURES)
    written, summary = {}, {"database": os.path.basename(db)}
    versus, tables = [], {}  # Markdown sections; rows per figure (figures.json)
    FIGURE_FACTS.clear()
    if "fig7" in wanted:
        found = fd.fig7_runs(conn, flt)
        data = fd.fig7_data(conn, found=found)
        summary["fig7"] = data
        summary["fig7_runs"] = found
        written["fig7"] = draw_fig7(data, found, outdir)
        tables["Fig 7"] = fd.versus_fig7(data)
        versus.append(("Fig 7", tables["Fig 7"]))
    if wanted & {"fig8", "fig9"}:
        found = fd.fig8_runs(conn, flt)
        run = found.best("fig8")
        subgraphs = fd.subgraph_data(conn, run) if run else []
        summary["fig8_9"] = {"run": run, "runs": found, "subgraphs": subgraphs}
        if "fig8" in wanted:
            written["fig8"] = draw_fig8(run, found, subgraphs, outdir)
            tables["Fig 8"] = fd.versus_fig8(subgraphs)
            versus.append((_versus_title("Fig 8", [run]), tables["Fig 8"]))
        if "fig9" in wanted:
            written["fig9"] = draw_fig9(run, found, subgraphs, outdir)
    for key, runs_of, data_of, draw, rows_of in (
            ("fig10", fd.fig10_runs, fd.fig10_data, draw_fig10, fd.versus_fig10),
            ("fig11", fd.fig11_runs, fd.fig11_data, draw_fig11, fd.versus_fig11)):
        if key not in wanted:
            continue
        found = runs_of(conn, flt)
        panels = [data_of(conn, run) for run in fd.micro_runs(found, key)]
        summary[key] = {"panels": panels, "runs": found}
        written[key] = draw(panels, found, outdir)
        # One table per panel of ours (measured, model-only): each says once what it is.
        title = f"Fig {key[3:]}"
        rows = {id(p): rows_of([p]) for p in panels if p}
        versus += [(_versus_title(title, [p.run]), rows[id(p)]) for p in panels if p] or [
            (title, [])]
        tables[title] = [r for p in panels if p for r in rows[id(p)]]
    if "fig12" in wanted:
        points = fd.fig12_data(conn, run_filter=flt)
        summary["fig12"] = {"stats": fig12_stats(points), "points": len(points)}
        written["fig12"] = draw_fig12(points, outdir)
    conn.close()
    if versus:
        summary["model_vs_paper"] = tables
        path = os.path.join(outdir, VERSUS_FILE)
        with open(path, "w") as f:
            f.write(fd.versus_markdown(versus, versus_preamble(db)))
        written["model_vs_paper"] = [path]
    summary["layout_problems"] = {k: f["problems"] for k, f in FIGURE_FACTS.items()
                                  if f["problems"]}
    with open(os.path.join(outdir, "figures.json"), "w") as f:
        json.dump(_jsonable(summary), f, indent=1, sort_keys=True)
    return written, summary


FORMATS = ["png", "pdf"]  # set by --formats


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="brickdl-figures",
        description="Draw the BrickDL paper's Figs 7-11 and the model-accuracy Fig 12 from a "
                    "brickdl tuning database (PNG and PDF), and the model-vs-paper table "
                    f"({VERSUS_FILE}).")
    parser.add_argument("db", help="tuning database (brickdl.db)")
    parser.add_argument("outdir", help="output folder (created if missing)")
    parser.add_argument("--target", default=None,
                        help="only runs whose target fingerprint starts with this, e.g. "
                             "'gpu:' or 'cpu:'")
    parser.add_argument("--gpu", default=None, metavar="SPEC",
                        help="only runs whose model GPU spec is SPEC (runs.gpu_spec, e.g. "
                             "A100-40GB or H200); default: the spec with runs of most of a "
                             "figure's experiments, then the latest")
    parser.add_argument("--precision", default=None, metavar="P",
                        help="only runs of precision P (fp32, tf32, bf16, fp16)")
    parser.add_argument("--batch", default=None, type=int, metavar="N",
                        help="only runs of batch N (default: each experiment's latest run)")
    parser.add_argument("--only", default=None,
                        help="comma-separated subset of " + ",".join(FIGURES))
    parser.add_argument("--formats", default="png,pdf",
                        help="comma-separated output formats (default: png,pdf; any that "
                             "matplotlib writes, e.g. svg)")
    args = parser.parse_args(argv)
    FORMATS[:] = [s.strip() for s in args.formats.split(",") if s.strip()]
    if not FORMATS:
        parser.error("--formats needs at least one format")
    only = None
    if args.only:
        only = [s.strip() for s in args.only.split(",") if s.strip()]
        bad = [s for s in only if s not in FIGURES]
        if bad:
            parser.error(f"unknown figure(s) {', '.join(bad)}; valid: {', '.join(FIGURES)}")
    flt = fd.RunFilter(target_prefix=args.target, gpu_spec=args.gpu,
                       precision=args.precision, batch=args.batch)
    try:
        written, _ = make_figures(args.db, args.outdir, only=only, run_filter=flt)
    except fd.DataError as e:
        print(f"brickdl-figures: {e}", file=sys.stderr)
        return 2
    for name, paths in written.items():
        print(f"{name}: {', '.join(paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
