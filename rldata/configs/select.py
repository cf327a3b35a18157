"""The parameters of `rldata filter` and `rldata stratify`, declared once (see rldata.configs.fields)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rldata.configs.fields import at_least, param, validate
from rldata.errors import ConfigError

__all__ = ["FilterConfig", "StratifyConfig"]

_FLAGGED_HELP = (
    "Keep tasks flagged by rldata decontaminate, lint (errors) or dedup --near (default: left out, the "
    "flag stored as their reason)."
)


def _steps(text: str) -> tuple[int, ...]:
    """'100,300' -> (100, 300), as --phase-steps gives it."""
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ConfigError(
            f"phase_steps: must be comma-separated integers, got {text!r}", field="phase_steps"
        ) from None


@dataclass(frozen=True)
class FilterConfig:
    """Which ledger slice `rldata filter` decides on, the band, and the selection it writes."""

    band: Any = param(
        cli_type=str,
        help="Pass-rate band LO,HI, e.g. 0.1,0.9 (decided from counts); from Python also a pair.",
    )
    name: str = param(help="Selection name; re-running replaces its rows in one commit.")
    model: str | None = param(None, help="Model of the pass rates (default: the only one).")
    params_hash: str | None = param(None, help="Sampling params hash (default: the only one).")
    verifier_key: str | None = param(
        # --verifier-version: the option's name before the passrates column was renamed
        None,
        deprecated=("--verifier-version",),
        help="Verifier name@version (default: the only one).",
    )
    inclusive: bool = param(True, flag="--inclusive/--exclusive", help="Whether the band edges are kept.")
    min_n: int | None = param(None, help="Fewer samples -> insufficient_samples (default: most common n).")
    domain: str | None = param(None, help="Only tasks of this domain.")
    dry_run: bool = param(False, help="Decide and print, write nothing.")
    from_run: str | None = param(
        None, help="Decide on this training run's live pass-rate estimates instead of the offline ledger."
    )
    version: int | None = param(None, help="With --from-run: the run's policy version (default: its last).")
    include_flagged: bool = param(False, help=_FLAGGED_HELP)

    def __post_init__(self):
        validate(self)


@dataclass(frozen=True)
class StratifyConfig:
    """The buckets `rldata stratify` draws over a selection, and the curriculum file it writes."""

    selection: str = param(short="-s", help="The selection to bucket (see rldata filter).")
    buckets: Any = param(
        None,
        cli_type=str,
        help="NAME:LOW-HIGH,... e.g. easy:0.7-0.9,medium:0.4-0.7,hard:0.1-0.4 (from Python also a list "
        "of rldata.curriculum.Bucket).",
    )
    quantiles: int | None = param(None, help="Instead of --buckets: this many equal-count buckets.")
    curriculum: Any = param(
        "buckets.yaml",
        short="-c",
        cli_type=str,
        help="Curriculum file to write (from Python, None writes none).",
    )
    seed: int = param(0, help="Sampler seed recorded in the curriculum.")
    phase_steps: tuple[int, ...] | None = param(
        None,
        cli_type=str,
        to_field=_steps,
        help="Step boundaries between phases, e.g. 100,300 (default: promotion rules).",
    )
    window: int = param(10, check=at_least(1), help="Promotion rules: steps of accuracy to average.")
    dominance: float = param(0.6, help="Warn when one category holds more than this of a bucket.")
    include_flagged: bool = param(False, help=_FLAGGED_HELP)

    def __post_init__(self):
        validate(self)
        if self.phase_steps is not None:
            object.__setattr__(self, "phase_steps", tuple(self.phase_steps))
        if self.buckets is not None and not isinstance(self.buckets, str):
            object.__setattr__(self, "buckets", tuple(self.buckets))
