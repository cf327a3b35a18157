"""Shared by the data-quality tests: small stores of real tasks, sampled answers written as rows."""

from __future__ import annotations

import json
from pathlib import Path

from rldata.ingest import sample_path

GSM8K_TEST = sample_path("gsm8k-test")  # the bundled first 200 GSM8K test problems (MIT)
GSM8K_TRAIN = sample_path("gsm8k")  # the bundled first 500 GSM8K train problems


def gsm8k(which: Path = GSM8K_TEST) -> list[dict]:
    return [json.loads(line) for line in which.read_text().splitlines()]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def tasks(store, rows: list[dict], *, source: str = "test", domain: str = "math") -> list[str]:
    """Append tasks t0.. (task_id = its name), return their ids."""
    out = []
    for i, r in enumerate(rows):
        r.setdefault("task_id", f"t{i}")
        r.setdefault("source", source)
        r.setdefault("domain", domain)
        out.append(r["task_id"])
    store.append("tasks", rows)
    return out


def samples(
    store, task_id: str, answers: list[tuple[str | None, bool]], *, model="m@1", run_id="r1", first=0
):
    """One trajectory and one answer-layer verification per (extracted answer, passed)."""
    trajs, vers = [], []
    for j, (ans, ok) in enumerate(answers, start=first):
        tid = f"{task_id}-{model}-{j}"
        trajs.append(
            {
                "traj_id": tid, "task_id": task_id, "run_id": run_id, "sample_idx": j, "model": model,
                "model_revision": "rev1", "policy_version": 0, "params_hash": "p", "completion": f"= {ans}",
                "prompt_tokens": 5, "completion_tokens": 3,
            }
        )  # fmt: skip
        vers.append(
            {
                "traj_id": tid, "task_id": task_id, "verifier": "math", "verifier_version": "1",
                "layer": "answer", "passed": ok, "score": float(ok), "extracted": ans,
            }
        )  # fmt: skip
    store.append("trajectories", trajs)
    store.append("verifications", vers)
