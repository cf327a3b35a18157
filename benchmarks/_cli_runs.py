"""Shared by the benchmarks that drive the real CLI (train_experiments, bench_async_curves,
bench_adaptive_train, bench_live_samplers): run `rldata` on a store, query it, summarise held-out
curves over seeds, and take the runs' `rldata train` settings from its own options (declared once,
on the config's fields) instead of declaring them again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

RLDATA = str(Path(sys.executable).parent / "rldata")


def train_settings(defaults: Mapping[str, Any], argv: Sequence[str]):
    """The benchmark's `rldata train` settings (a TrainCommand): its ``defaults`` (TrainConfig and
    TrainRun fields by name) with the `rldata train` options in ``argv`` (what argparse left,
    ``--lr 1e-4 --n 4 --eval-n 8``) winning, parsed by that command's own options."""
    from rldata.cli._options import parse_config
    from rldata.trainer.config import TrainCommand

    return parse_config(TrainCommand, list(argv), dict(defaults))


def settings_dict(settings) -> dict[str, Any]:
    """The settings as plain fields by name (what a summary records and a config file holds)."""
    from rldata.configs.fields import as_flat

    return json.loads(json.dumps(as_flat(settings), default=list))


def settings_file(settings, path: Path, **changes: Any) -> Path:
    """Write the settings (with ``changes``, fields by name) as the YAML `rldata train --config` reads."""
    import yaml

    from rldata.configs.fields import nest
    from rldata.trainer.config import TrainCommand

    path.write_text(yaml.safe_dump({**settings_dict(settings), **nest(TrainCommand, changes)}))
    return path


def rldata(store: Path, *argv: str, tail: int = 2) -> str:
    """Run ``rldata ARGV`` on ``store``; log the command, its time and stderr's last lines; stdout."""
    t0 = time.monotonic()
    env = {**os.environ, "RLDATA_STORE": str(store)}
    p = subprocess.run([RLDATA, *argv], capture_output=True, text=True, env=env, check=False)
    last = "\n".join(p.stderr.strip().splitlines()[-tail:])
    print(
        f"$ rldata {' '.join(argv)[:160]}  [{time.monotonic() - t0:.0f}s]\n{last}",
        file=sys.stderr,
        flush=True,
    )
    if p.returncode:
        raise SystemExit(f"failed ({p.returncode}): {p.stderr[-2000:]}")
    return p.stdout


def sql(store: Path, q: str) -> list[dict]:
    return json.loads(rldata(store, "sql", q, "--format", "json"))


def band_summary(curves: Iterable[Sequence[Sequence[float]]]) -> dict[str, dict]:
    """Curves [(step, accuracy), ...] of one setting's seeds -> {step: mean, min, max, seeds}."""
    by_step: dict[int, list[float]] = {}
    for curve in curves:
        for step, acc in curve:
            by_step.setdefault(int(step), []).append(acc)
    return {
        str(s): {"mean": sum(v) / len(v), "min": min(v), "max": max(v), "seeds": len(v)}
        for s, v in sorted(by_step.items())
    }


def plot_bands(
    summary: dict[str, dict], path: Path, *, eval_n: int, style: Callable[[str], str] = lambda name: "-"
) -> None:
    """One line per setting (mean over seeds) with its min..max band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.8), dpi=100)
    for name, pts in summary.items():
        xs = [int(s) for s in pts]
        line = ax.plot(xs, [p["mean"] for p in pts.values()], marker="o", label=name, linestyle=style(name))[
            0
        ]
        ax.fill_between(
            xs,
            [p["min"] for p in pts.values()],
            [p["max"] for p in pts.values()],
            color=line.get_color(),
            alpha=0.12,
        )
    ax.set_xlabel("training step")
    ax.set_ylabel(f"held-out accuracy (N={eval_n})")
    ax.set_title("mean over seeds, band = min..max", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
