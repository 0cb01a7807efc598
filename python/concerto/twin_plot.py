"""The twin's plot (``DIR/twin.png``): per application, per operation, the
real runs' range (a bar from the slowest to the fastest run, a dot at
their median) beside the simulated value (a cross), so a reader sees at a
glance whether the model falls inside what the real side did and how far
the real runs spread."""

from __future__ import annotations

from pathlib import Path

from concerto.report import pyplot


def points(figures: dict) -> list[dict]:
    """What the plot draws of one table: per operation its slowest, median
    and fastest real run and the simulated value."""
    out = []
    for r in figures["rows"]:
        runs = r.get("real_runs") or [r["real"]]
        out.append({"operation": r["operation"], "low": min(runs), "median": r["real"], "high": max(runs),
                    "sim": r["sim"]})
    return out


def plot(tables: list[tuple[str, dict]], path: Path) -> Path:
    """One panel per table (an application's operations, in its unit);
    a log scale where one panel's figures span more than 20x (mdtest's
    tree and file phases)."""
    plt = pyplot()
    fig, axes = plt.subplots(len(tables), 1, figsize=(8, 0.6 + 2.8 * len(tables)), squeeze=False)
    for ax, (title, figures) in zip(axes[:, 0], tables):
        drawn = points(figures)
        xs = range(len(drawn))
        for x, p in zip(xs, drawn):
            ax.plot([x - 0.08, x - 0.08], [p["low"], p["high"]], color="C0", linewidth=5, alpha=0.35,
                    solid_capstyle="butt", label="real runs (range)" if x == 0 else None)
            ax.plot(x - 0.08, p["median"], "o", color="C0", label="real (median)" if x == 0 else None)
            ax.plot(x + 0.08, p["sim"], "x", color="C3", markersize=9, markeredgewidth=2,
                    label="simulated" if x == 0 else None)
        values = [v for p in drawn for v in (p["low"], p["high"], p["sim"]) if v > 0]
        if values and max(values) > 20 * min(values):
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        # mdtest's phase names, a word a line, so that six fit side by side.
        ax.set_xticks(list(xs), [p["operation"].replace(" ", "\n") for p in drawn])
        ax.set_xlim(-0.5, len(drawn) - 0.5)
        ax.set_ylabel(figures["unit"])
        ax.set_title(title, fontsize=9, loc="left")
        ax.grid(axis="y", color="0.9")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
