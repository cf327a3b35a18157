"""``rldata demo``: the whole loop on the embedded model and bundled tasks, in a few minutes."""

from __future__ import annotations

import json
import sys

import typer

from rldata.cli._common import get_store
from rldata.console import log


def demo(
    ctx: typer.Context,
    out: str = typer.Option("rldata-demo", help="Directory for buckets.yaml, the report and checkpoints."),
    tasks: int = typer.Option(1500, help="Bundled training tasks to sample (N per task)."),
    n: int = typer.Option(16, "--n", help="Samples per task for the pass-rate ledger."),
    steps: int = typer.Option(60, help="GRPO steps."),
    eval_tasks: int = typer.Option(
        200, "--eval-tasks", help="Held-out tasks evaluated before and after training."
    ),
    seed: int = typer.Option(0, help="Seed for sampling and training."),
    env: str = typer.Option(
        None,
        "--env",
        help="Run the loop in this environment, e.g. calculator (the bundled "
        "model's tool use: sample, filter, train and evaluate as episodes).",
    ),
) -> None:
    """Ingest -> sample N=16 -> filter -> stratify -> train with the curriculum -> report.

    Prints a JSON summary (where each artifact is, held-out accuracy before and after) on stdout
    and three SQL queries worth running next on stderr.
    """
    from rldata.demo import ENV_QUERY, NEXT_QUERIES, DemoConfig, run_demo

    store = get_store(ctx, create=True)
    result = run_demo(
        store, DemoConfig(out=out, tasks=tasks, n=n, steps=steps, eval_tasks=eval_tasks, seed=seed, env=env)
    )
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
