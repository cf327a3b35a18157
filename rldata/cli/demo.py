"""``rldata demo``: the whole loop on the embedded model and bundled tasks, in a few minutes."""

from __future__ import annotations

import json
import sys

import typer

from rldata.cli._common import get_store
from rldata.cli._options import command
from rldata.console import log
from rldata.demo import ENV_QUERY, NEXT_QUERIES, DemoConfig, run_demo


@command(DemoConfig)
def demo(ctx: typer.Context, config: DemoConfig) -> None:
    """Ingest -> sample N=16 -> filter -> stratify -> train with the curriculum -> report.

    Prints a JSON summary (where each artifact is, held-out accuracy before and after) on stdout
    and three SQL queries worth running next on stderr.
    """
    store = get_store(ctx, create=True)
    result = run_demo(store, config)
    n, env = config.sampling.n, config.env
    log("\n== done. Artifacts:")
    for key in ("store", "buckets_yaml", "report", "training_report", "checkpoint"):
        log(f"  {key:15s} {result[key]}")
    log(
        f"  held-out accuracy (N={n}): before {result['heldout_accuracy_before']}, "
        f"after {result['heldout_accuracy_after']}"
    )
    log("\nThree queries worth running next:")
    for q in NEXT_QUERIES + ([ENV_QUERY] if env else []):
        log(f'  rldata --store {store.root} sql "{q}"')
    sys.stdout.write(json.dumps(result, indent=2, default=str) + "\n")


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
