"""Import rollouts other trainers logged (veRL, TRL, generic JSONL) into trajectories and verifications.

Each sample is linked to a task by its normalized prompt (:func:`rldata.ingest.normalize_text`): an
existing task with that prompt (the one whose answer matches, when several do), or else a new task
added under ``source`` with the id ingest would give it (:func:`rldata.ingest.task_id`).  Ids are
deterministic, so importing the same dump again adds nothing:

- run_id: ``--run-id``, or ``import:<format>:<hash of the dump's resolved path>``;
- traj_id: hash of (``--run-id`` if given, file name, line/row, hash of the raw record), so a dump
  directory that grew by a step imports just the new step, even after it was moved.

Trajectories get ``model`` (default "unknown"), ``params_hash`` "imported", ``policy_version`` =
the logged step (0 without one) and ``reward`` = the logged score (TRL: the sum of the reward
columns, i.e. unit weights).  Verifications get verifier ``imported:<format>``, version
"imported", one row per score (layer "answer"; TRL: one per reward column, layer = its name),
``passed = score > 0`` and the extra logged fields as ``detail``.

All rows are validated before anything is written; each table then gets one commit.  A bad record
fails the whole import (``on_error="fail"``) or is skipped and reported (``on_error="skip"``).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rldata.errors import ConfigError, InputError, RldataError
from rldata.ingest import normalize_text
from rldata.ingest import task_id as make_task_id
from rldata.interop.options import ImportConfig
from rldata.interop.readers import READERS, Rollout, rollout_files
from rldata.runs.core import record_run
from rldata.schemas import get as table_schema
from rldata.store.core import Store
from rldata.store.validate import conform

__all__ = ["IMPORT_FORMATS", "ImportResult", "default_run_id", "import_rollouts"]

IMPORT_FORMATS = tuple(READERS)  # the built-in ones; READERS holds every registered format
_MAX_REPORTED = 20


@dataclass(frozen=True)
class ImportResult:
    run_id: str
    files: int
    records: int  # records read and imported (before dedupe)
    skipped: int
    errors: list[str] = field(default_factory=list)  # first few skipped records' messages
    tasks_linked: int = 0  # distinct existing tasks the records matched
    tasks_added: int = 0
    trajectories_added: int = 0
    verifications_added: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


# ---- task linking -----------------------------------------------------------------------------
def _task_index(store: Store) -> dict[str, list[tuple[str, str | None]]]:
    """normalized prompt -> [(task_id, normalized answer), ...] for every task in the store."""
    df = store.scan("tasks").select("task_id", "prompt", "answer").collect()
    index: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
    for tid, prompt, answer in df.sort("task_id").iter_rows():
        index[normalize_text(prompt)].append((tid, None if answer is None else normalize_text(answer)))
    return index


def _pick(candidates: list[tuple[str, str | None]], answer: str | None) -> str:
    if answer is not None and len(candidates) > 1:
        want = normalize_text(answer)
        for tid, a in candidates:
            if a == want:
                return tid
    return candidates[0][0]


def _arrow(name: str, rows: list[dict]):
    """Rows -> an Arrow table typed by the table's schema (conform then checks nulls and keys)."""
    import pyarrow as pa

    ts = table_schema(name)
    cols = {k for r in rows for k in r}
    fields = [f.with_nullable(True) for f in ts.schema if f.name in cols]
    return pa.Table.from_pylist(rows, schema=pa.schema(fields))


# ---- building rows ----------------------------------------------------------------------------
def _read(files: list[Path], spec: ImportConfig) -> tuple[list[Rollout], list[InputError]]:
    read = READERS.resolve(spec.format).read
    good, bad = [], []
    for f in files:
        for item in read(f, spec.opts):
            if isinstance(item, InputError):
                if spec.on_error == "fail":
                    raise item
                bad.append(item)
            else:
                good.append(item)
    return good, bad


def _rows(
    rollouts: list[Rollout], spec: ImportConfig, run_id: str, store: Store
) -> tuple[dict[str, list], int]:
    index = _task_index(store)
    source = spec.source or f"import:{spec.format}"
    new_tasks: dict[str, dict] = {}  # normalized prompt -> task row
    linked: set[str] = set()
    group_sizes: dict[tuple, int] = defaultdict(int)
    trajs, verifs = [], []
    id_key = spec.run_id or ""  # an explicit run id separates otherwise identical dumps
    norm: dict[str, str] = {}  # a dump repeats each prompt once per sample: normalize it once
    for r in rollouts:
        key = norm.get(r.prompt)
        if key is None:
            key = norm[r.prompt] = normalize_text(r.prompt)
        if key in index:
            task_id = _pick(index[key], r.answer)
            linked.add(task_id)
        else:
            if key not in new_tasks:
                new_tasks[key] = {
                    "task_id": make_task_id(r.prompt, r.answer, source),
                    "source": source,
                    "domain": spec.domain,
                    "prompt": r.prompt,
                    "messages": r.prompt_messages,
                    "answer": r.answer,
                    "metadata": json.dumps({"imported_from": spec.format}),
                }
            elif new_tasks[key]["answer"] is None and r.answer is not None:
                new_tasks[key]["answer"] = r.answer  # ids were set from the first record; keep it stable
            task_id = new_tasks[key]["task_id"]
        traj_id = hashlib.sha256(f"{id_key}|{r.file}|{r.where}|{r.digest}".encode()).hexdigest()[:32]
        sample_idx = group_sizes[(r.step, task_id)]
        group_sizes[(r.step, task_id)] += 1
        scores = {k: v for k, v in r.scores.items() if v is not None}
        trajs.append(
            {
                "traj_id": traj_id,
                "task_id": task_id,
                "run_id": run_id,
                "sample_idx": sample_idx,
                "model": spec.model,
                "policy_version": r.step or 0,
                "params_hash": "imported",
                "prompt": r.prompt,
                "completion": r.completion,
                "messages": (r.prompt_messages + r.completion_messages)
                if r.prompt_messages and r.completion_messages
                else None,
                "step": r.step,
                "reward": sum(scores.values()) if scores else None,
                "advantage": r.advantage,
            }
        )
        detail = json.dumps(r.detail, ensure_ascii=False, default=str) if r.detail else None
        for layer, score in scores.items():
            verifs.append(
                {
                    "traj_id": traj_id,
                    "task_id": task_id,
                    "verifier": f"imported:{spec.format}",
                    "verifier_version": "imported",
                    "layer": layer,
                    "passed": score > 0,
                    "score": score,
                    "detail": detail,
                }
            )
    return {"tasks": list(new_tasks.values()), "trajectories": trajs, "verifications": verifs}, len(linked)


def default_run_id(path: str | Path, fmt: str) -> str:
    return f"import:{fmt}:{hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:12]}"


def import_rollouts(store: Store, spec: ImportConfig) -> ImportResult:
    """Read the dump at ``spec.path`` (a file or a directory of them) and write it to the store."""
    if spec.path is None:
        raise ConfigError(
            "path: the dump to import (a file or a directory of them) is required", field="path"
        )
    path = Path(spec.path)
    files = rollout_files(path, spec.format)
    rollouts, bad = _read(files, spec)
    if not rollouts:
        reason = f"no valid records ({len(bad)} bad, first: {bad[0]})" if bad else "no records"
        raise RldataError(f"{path}: {reason}")
    run_id = spec.run_id or default_run_id(path, spec.format)
    rows, n_linked = _rows(rollouts, spec, run_id, store)
    # validate every table before the first commit: a schema error must leave the store untouched
    tables = {name: conform(table_schema(name), _arrow(name, data)) for name, data in rows.items()}
    args = {"path": str(path), "format": spec.format, "on_error": spec.on_error, "model": spec.model}
    added = {}
    # every table it writes, checked before the first commit: a full disk or a read-only table
    # fails here with nothing written (a failure past this point: re-running completes it, keyed)
    store.preflight({name: t.nbytes for name, t in tables.items()} | {"runs": 0})
    with record_run(store, "import", args, run_id=run_id) as run:
        for name in ("tasks", "trajectories", "verifications"):  # parents first: a crash leaves no orphans
            added[name] = store.append(name, tables[name], dedupe=True)
        result = ImportResult(
            run_id=run_id,
            files=len(files),
            records=len(rollouts),
            skipped=len(bad),
            errors=[str(e) for e in bad[:_MAX_REPORTED]],
            tasks_linked=n_linked,
            tasks_added=added["tasks"],
            trajectories_added=added["trajectories"],
            verifications_added=added["verifications"],
        )
        run.summary = {k: v for k, v in result.to_dict().items() if k != "errors"}
    return result
