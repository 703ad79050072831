"""Run a benchmark's contenders side by side, repeat, summarise, write JSON and a plot."""

from __future__ import annotations

import json
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Case:
    """One contender on one input: ``run()`` does the work and returns a count (events)."""

    contender: str
    input: str
    run: Callable[[], int]
    size_bytes: int
    seconds: list[float] = field(default_factory=list)
    count: int = 0


def measure(cases: list[Case], repeat: int, log=print) -> None:
    """Round-robin over the cases ``repeat`` times, so that noise hits them alike."""
    for round_ in range(repeat):
        for case in cases:
            start = time.perf_counter()
            case.count = case.run()
            case.seconds.append(time.perf_counter() - start)
        log(f"round {round_ + 1}/{repeat} done")


def summarise(case: Case) -> dict:
    seconds = sorted(case.seconds)
    median = statistics.median(seconds)
    return {
        "contender": case.contender,
        "input": case.input,
        "bytes": case.size_bytes,
        "count": case.count,
        "runs": len(seconds),
        "median_s": median,
        "min_s": seconds[0],
        "max_s": seconds[-1],
        "mb_per_s": case.size_bytes / 1e6 / median,
        "mb_per_s_min": case.size_bytes / 1e6 / seconds[-1],
        "mb_per_s_max": case.size_bytes / 1e6 / seconds[0],
    }


def write_results(name: str, rows: list[dict], extra: dict | None = None) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    meta = {
        "benchmark": name,
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "python": platform.python_version(),
        "machine": platform.machine(),
        **(extra or {}),
    }
    path.write_text(json.dumps({"meta": meta, "results": rows}, indent=2) + "\n")
    return path


def bar_plot(name: str, rows: list[dict], metric: str, label: str) -> Path:
    """Grouped bars: one group per input, one bar per contender, whiskers min..max."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    inputs = list(dict.fromkeys(r["input"] for r in rows))
    contenders = list(dict.fromkeys(r["contender"] for r in rows))
    width = 0.8 / len(contenders)
    fig, ax = plt.subplots(figsize=(2.2 + 1.6 * len(inputs) * len(contenders) / 3, 4.2))
    for i, contender in enumerate(contenders):
        xs, ys, lo, hi = [], [], [], []
        for j, input_ in enumerate(inputs):
            row = next(
                (r for r in rows if r["input"] == input_ and r["contender"] == contender), None
            )
            if row is None:
                continue
            xs.append(j + i * width)
            ys.append(row[metric])
            lo.append(row[metric] - row.get(f"{metric}_min", row[metric]))
            hi.append(row.get(f"{metric}_max", row[metric]) - row[metric])
        ax.bar(xs, ys, width, label=contender, yerr=[lo, hi], capsize=2)
    ax.set_xticks([j + width * (len(contenders) - 1) / 2 for j in range(len(inputs))], inputs)
    ax.set_ylabel(label)
    return _save(fig, ax, name, name)


def log_log_plot(name: str, lines: dict, xlabel: str, title: str) -> Path | None:
    """One line per entry of ``lines`` (label -> (points, line style)), both axes log
    scale, seconds up; ``None`` when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, (points, style) in lines.items():
        if points:
            xs, ys = zip(*sorted(points), strict=True)
            ax.plot(xs, ys, style, marker="o", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("seconds")
    return _save(fig, ax, name, title)


def _save(fig, ax, name: str, title: str) -> Path:
    """Title, legend, and the figure written to results/NAME.png."""
    import matplotlib.pyplot as plt

    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = RESULTS / f"{name}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def markdown_table(rows: list[dict], baseline: str, columns: list[tuple[str, str, str]]) -> str:
    """A table with a ratio column against ``baseline`` (on the same input)."""
    head = ["input", "contender", *(c[1] for c in columns), f"× {baseline}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        base = next(r for r in rows if r["input"] == row["input"] and r["contender"] == baseline)
        ratio = base["median_s"] / row["median_s"]
        cells = [row["input"], row["contender"], *(format(row[c[0]], c[2]) for c in columns)]
        lines.append("| " + " | ".join([*cells, f"{ratio:.2f}"]) + " |")
    return "\n".join(lines)
