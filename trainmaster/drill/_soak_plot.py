"""A soak's plot: rank 0's step against wall time, each fault a marked line."""

from __future__ import annotations

from pathlib import Path

from trainmaster.drill._soak import SoakResult


def plot_soak(result: SoakResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # a file, no display
    import matplotlib.pyplot as plt

    acc = result.accounting
    steps = [(m.time - acc.start, m.step) for m in result.marks
             if m.step is not None and acc.start <= m.time <= acc.end]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.plot([t / 60 for t, _ in steps], [s for _, s in steps], ".", markersize=2,
            label="step (rank 0)")
    colours = {"worker-kill": "tab:red", "container-kill": "tab:orange",
               "node-loss": "tab:purple", "nic-down": "tab:green"}
    for kind in dict.fromkeys(c.fault.kind for c in acc.faults):
        for i, cost in enumerate(c for c in acc.faults if c.fault.kind == kind):
            ax.axvline((cost.fault.at - acc.start) / 60, color=colours.get(kind, "grey"),
                       linestyle="--", linewidth=1, label=kind if i == 0 else None)
    ax.set_xlabel("minutes into the soak")
    ax.set_ylabel("step")
    ax.set_title(f"{result.job} ({result.launcher}): ETTR {acc.ettr:.1%}, a fault every "
                 f"{result.fault_every:g}s")
    ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
