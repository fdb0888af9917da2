"""PNG plots for ``nlu-engine test``: confusion matrices, confidence histograms, learning curves.

matplotlib is imported inside each function and used without pyplot (a ``Figure`` drawn by the
Agg canvas), so plotting needs no display, keeps no global state and never opens a window.
Figures are sized to the number of labels so that 64 intents stay readable.

Labels in scripts the default font (DejaVu Sans) has no glyphs for (Chinese intent names) are
drawn with an installed CJK font as a fallback (Noto Sans CJK, WenQuanYi: Debian's
``fonts-noto-cjk`` / ``fonts-wqy-zenhei``); without one, such a label is drawn as its escaped
code points (``\u95ee\u5019``) rather than as empty boxes. The HTML report shows every label as
written.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

NONE_LABEL = "(none)"
DEFAULT_FAMILY = "DejaVu Sans"
#: font families with CJK glyphs, tried in this order when a label needs them
CJK_FAMILIES = (
    "Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans CJK TC", "Source Han Sans SC",
    "WenQuanYi Zen Hei", "WenQuanYi Micro Hei", "Droid Sans Fallback", "SimHei", "Microsoft YaHei",
    "PingFang SC",
)


def available() -> bool:
    """Whether matplotlib can be imported."""
    return importlib.util.find_spec("matplotlib") is not None


def display_label(label: str) -> str:
    """How a label is shown: the empty label (no prediction) as ``(none)``."""
    return label if label else NONE_LABEL


_CJK_FILES = ("notosanscjk", "notoserifcjk", "wqy", "droidsansfallback", "sourcehansans")


@functools.cache
def _default_glyphs() -> frozenset[int]:
    """The code points the default font draws."""
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    path = font_manager.findfont(font_manager.FontProperties(family=DEFAULT_FAMILY))
    return frozenset(FT2Font(path).get_charmap())


@functools.cache
def cjk_family() -> str | None:
    """The first installed family of :data:`CJK_FAMILIES`, or None."""
    from matplotlib import font_manager

    def installed() -> set[str]:
        return {font.name for font in font_manager.fontManager.ttflist}

    if not installed() & set(CJK_FAMILIES):
        # matplotlib's font list is cached on first use: a CJK font installed later is added here
        for path in font_manager.findSystemFonts():
            if any(key in Path(path).name.lower() for key in _CJK_FILES):
                try:
                    font_manager.fontManager.addfont(path)
                except (OSError, RuntimeError, ValueError):
                    continue
    family = next((f for f in CJK_FAMILIES if f in installed()), None)
    if family is not None:  # CJK fonts come in one weight (500): matplotlib logs each substitution
        logging.getLogger("matplotlib.font_manager").addFilter(_weight_substitution)
    return family


def _weight_substitution(record: logging.LogRecord) -> bool:
    return "Failed to find font weight" not in record.getMessage()


def drawable_labels(labels: Sequence[str]) -> tuple[list[str], list[str]]:
    """The labels as drawn and the font families to draw them with (see the module doc)."""
    names = [display_label(label) for label in labels]
    glyphs = _default_glyphs()

    def drawable(name: str) -> bool:
        return all(ord(c) in glyphs or c.isspace() for c in name)

    if all(drawable(name) for name in names):
        return names, [DEFAULT_FAMILY]
    family = cjk_family()
    if family is not None:
        return names, [DEFAULT_FAMILY, family]
    escaped = [n if drawable(n) else n.encode("ascii", "backslashreplace").decode("ascii") for n in names]
    return escaped, [DEFAULT_FAMILY]


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _save(figure: Any, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png")
    return path


def plot_confusion_matrix(
    labels: Sequence[str],
    matrix: Sequence[Sequence[int]],
    path: str | Path,
    title: str = "Confusion matrix",
    axis_name: str = "label",
) -> Path:
    """Rows are gold labels, columns predictions, both in the given (sorted) order.

    Cell colour is the share of the row's examples, so rare and frequent labels read alike; every
    non-zero cell is labelled with its count.
    """
    import numpy as np

    n = len(labels)
    names, families = drawable_labels(labels)
    counts = np.asarray(matrix, dtype=float).reshape(n, n)
    totals = counts.sum(axis=1, keepdims=True)
    shares = np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)

    cell = 0.5 if n <= 12 else 0.32 if n <= 40 else 0.26
    tick_size = 10 if n <= 12 else 8 if n <= 40 else 7
    count_size = 9 if n <= 12 else 7 if n <= 40 else 5.5
    label_inches = 0.075 * tick_size / 7 * min(max((len(s) for s in names), default=1), 40)
    side = max(3.0, cell * n)
    figure = _figure(side + label_inches + 1.8, side + label_inches + 1.0)
    axes = figure.add_subplot()
    image = axes.imshow(shares, cmap="Blues", vmin=0.0, vmax=1.0, interpolation="nearest")
    axes.set_xticks(range(n), names, rotation=90, fontsize=tick_size, fontfamily=families)
    axes.set_yticks(range(n), names, fontsize=tick_size, fontfamily=families)
    axes.set_xlabel(f"predicted {axis_name}")
    axes.set_ylabel(f"true {axis_name}")
    total = int(counts.sum())
    correct = int(np.trace(counts))
    axes.set_title(f"{title}\n{correct} of {total} on the diagonal", fontsize=11)
    if n <= 150:
        for i in range(n):
            for j in range(n):
                if counts[i, j] > 0:
                    axes.text(j, i, str(int(counts[i, j])), ha="center", va="center",
                              fontsize=count_size,
                              color="white" if shares[i, j] > 0.55 else "black")
    axes.set_xticks(np.arange(-0.5, n, 1), minor=True)
    axes.set_yticks(np.arange(-0.5, n, 1), minor=True)
    axes.grid(which="minor", color="#dddddd", linewidth=0.3)
    axes.tick_params(which="minor", length=0)
    colorbar = figure.colorbar(image, ax=axes, shrink=min(0.8, 4.0 / max(side, 1.0)) if n > 12 else 0.8)
    colorbar.set_label(f"share of the true {axis_name}'s examples")
    return _save(figure, Path(path))


def plot_confidence_histogram(
    correct: Sequence[float],
    wrong: Sequence[float],
    path: str | Path,
    title: str = "Prediction confidence",
) -> Path:
    """Two histograms over [0, 1]: confidence of right predictions above, of wrong ones below."""
    import numpy as np

    bins = np.linspace(0.0, 1.0, 21)
    figure = _figure(8.0, 5.5)
    top, bottom = figure.subplots(2, 1, sharex=True)
    for axes, values, colour, name in (
        (top, correct, "#2f9e44", "right"),
        (bottom, wrong, "#e03131", "wrong"),
    ):
        axes.hist(np.clip(np.asarray(values, dtype=float), 0.0, 1.0), bins=bins, color=colour,
                  edgecolor="white")
        mean = f", mean {float(np.mean(values)):.3f}" if len(values) else ""
        axes.set_title(f"{name} predictions ({len(values)}{mean})", fontsize=10)
        axes.set_ylabel("count")
        axes.grid(axis="y", color="#eeeeee")
        axes.set_axisbelow(True)
    bottom.set_xlabel("confidence")
    bottom.set_xlim(0.0, 1.0)
    figure.suptitle(title)
    return _save(figure, Path(path))


def plot_comparison(comparison: Mapping[str, Any], path: str | Path) -> Path:
    """F1 against the number of training examples, one line per config (mean ± std over runs).

    ``comparison`` is what ``nlu-engine test --config ...`` writes to ``comparison.json``:
    ``num_examples`` (runs × percentages) and per config ``intent_macro_f1`` (runs × percentages)
    and ``entities`` ``{extractor: {"exact_f1": runs × percentages}}``.
    """
    import numpy as np

    x = np.asarray(comparison["num_examples"], dtype=float).mean(axis=0)
    results = comparison["results"]
    panels: list[tuple[str, list[tuple[str, Any]]]] = []
    intent_lines = [(name, r["intent_macro_f1"]) for name, r in results.items()
                    if r.get("intent_macro_f1")]
    if intent_lines:
        panels.append(("Intents: macro F1", intent_lines))
    entity_lines = [
        (f"{name} / {extractor}", scores["exact_f1"])
        for name, r in results.items()
        for extractor, scores in (r.get("entities") or {}).items()
    ]
    if entity_lines:
        panels.append(("Entities: exact-span micro F1", entity_lines))
    if not panels:
        panels.append(("nothing to plot", []))
    figure = _figure(6.5 * len(panels), 4.8)
    axes_list = figure.subplots(1, len(panels), squeeze=False)[0]
    _, families = drawable_labels([name for _, lines in panels for name, _ in lines])
    for axes, (title, lines) in zip(axes_list, panels, strict=True):
        for name, values in lines:
            array = np.asarray(values, dtype=float)
            mean, std = array.mean(axis=0), array.std(axis=0)
            axes.errorbar(x, mean, yerr=std, marker="o", capsize=3, label=name)
        axes.set_title(title)
        axes.set_xlabel("training examples")
        axes.set_ylabel("F1")
        axes.set_ylim(0.0, 1.02)
        axes.grid(color="#eeeeee")
        if lines:
            axes.legend(loc="lower right", prop={"size": 8, "family": families})
    runs = len(comparison["num_examples"])
    figure.suptitle(f"Pipeline comparison (mean ± std over {runs} run{'s' if runs != 1 else ''})")
    return _save(figure, Path(path))


def plot_reliability(bins: Sequence[Mapping[str, float]], ece: float, path: str | Path,
                     title: str = "Intent confidence: reliability", ece_floor: float | None = None,
                     accuracy: str = "accuracy") -> Path:
    """Accuracy against mean confidence per bin (bars; the diagonal is perfect calibration),
    with each bin's share of the messages beneath; ``ece_floor``: what calibrated confidences
    would measure on as many messages, named in the title; ``accuracy``: the name of what is
    right (the y axis)."""
    figure = _figure(6.5, 6.5)
    top, bottom = figure.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    lows = [b["low"] for b in bins]
    widths = [b["high"] - b["low"] for b in bins]
    top.bar(lows, [b["accuracy"] for b in bins], width=widths, align="edge", color="#4263eb",
            edgecolor="white", label=accuracy)
    top.bar(lows, [abs(b["confidence"] - b["accuracy"]) for b in bins],
            bottom=[min(b["accuracy"], b["confidence"]) for b in bins], width=widths, align="edge",
            color="#e03131", alpha=0.35, edgecolor="#e03131", label="gap to the mean confidence")
    top.plot([0, 1], [0, 1], color="#495057", linestyle="--", linewidth=1, label="calibrated")
    top.set_ylim(0, 1)
    top.set_ylabel(accuracy)
    floor = f"; {ece_floor:.3f} if calibrated" if ece_floor is not None else ""
    top.set_title(f"{title} (ECE {ece:.3f}{floor})", fontsize=11)
    top.legend(loc="upper left", fontsize=8)
    total = sum(b["count"] for b in bins) or 1
    bottom.bar(lows, [b["count"] / total for b in bins], width=widths, align="edge", color="#868e96",
               edgecolor="white")
    bottom.set_ylabel("share")
    bottom.set_xlabel("confidence")
    bottom.set_xlim(0, 1)
    return _save(figure, Path(path))


def plot_threshold_sweep(sweep: Sequence[Mapping[str, float]], suggested: float, path: str | Path,
                         with_out_of_scope: bool) -> Path:
    """What a fallback threshold keeps and catches: in-scope accuracy (a fallback counts as an
    error), accuracy on the kept messages, the share caught and (with out-of-scope test data) the
    out-of-scope recall, with the suggested threshold marked."""
    figure = _figure(8.0, 5.0)
    axes = figure.subplots()
    x = [p["threshold"] for p in sweep]
    lines = [("in_scope_accuracy", "in-scope accuracy (fallback = error)", "#2f9e44"),
             ("kept_accuracy", "accuracy on the messages kept", "#4263eb"),
             ("caught", "share of messages caught", "#868e96")]
    if with_out_of_scope:
        lines.append(("out_of_scope_recall", "out-of-scope recall", "#e03131"))
    for key, label, colour in lines:
        axes.plot(x, [p[key] for p in sweep], color=colour, label=label)
    axes.axvline(suggested, color="#495057", linestyle="--", linewidth=1)
    axes.text(suggested, 0.02, f" {suggested:.2f}: within 1 point of no fallback", fontsize=8)
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1.01)
    axes.set_xlabel("FallbackClassifier threshold")
    axes.grid(color="#eeeeee")
    axes.legend(loc="lower left", fontsize=8)
    axes.set_title("Fallback threshold sweep", fontsize=11)
    return _save(figure, Path(path))
