"""``rldata doctor``: check every table and the invariants between them; with ``repair``, fix what
can be fixed without guessing.

Checks (each a plain function returning :class:`Finding` rows):

- ``log``: a commit file of a table's Delta log that is empty or not complete JSON.  Repair moves
  that commit and every later one out of the log (into ``.rldata-doctor/`` at the store root, kept
  for inspection), so the table reads at its last complete version again.
- ``duplicates``: rows sharing a table's key.  Repair rewrites the table keeping the first of each.
- ``orphans``: trajectories without a verification, and verifications without a trajectory.  Reported
  only: ``rldata sample`` re-verifies the former when run again; the latter need a person.
- ``ledger``: ``passrates`` rows that disagree with a fresh recount of the stored verifications.
  Repair upserts the recount.
- ``stuck_runs``: runs stored as ``running`` whose owner is gone (:func:`rldata.runs.effective_status`).
  Repair marks them ``failed`` with the reason.
- ``stray``: files at the store root or in a table directory that belong to no table, and data files
  no commit ever added.  Reported only (``rldata compact`` removes retired files).
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from rldata import schemas
from rldata.damage import commit_files
from rldata.errors import RldataError
from rldata.store import Store

__all__ = ["Finding", "doctor"]

from rldata.damage import QUARANTINE as _QUARANTINE


@dataclass(frozen=True)
class Finding:
    check: str
    table: str
    count: int
    detail: str
    repaired: bool = False

    def row(self) -> dict:
        return {
            "check": self.check,
            "table": self.table,
            "count": self.count,
            "detail": self.detail,
            "repaired": self.repaired,
        }


def doctor(store: Store, *, repair: bool = False) -> list[Finding]:
    """Run every check (repairing first what the later checks need: a readable log)."""
    found = check_logs(store, repair=repair)
    readable = [n for n in schemas.TABLES if n not in store.damaged]
    found += check_data_files(store, readable, repair=repair)
    readable = [n for n in readable if n not in {f.table for f in found if not f.repaired}]
    found += check_duplicates(store, readable, repair=repair)
    found += check_orphans(store, readable)
    found += check_ledger(store, readable, repair=repair)
    found += check_stuck_runs(store, readable, repair=repair)
    found += check_stray(store, repair=repair)
    found += check_writable(store)
    return found


def check_writable(store: Store) -> list[Finding]:
    """Tables whose directory cannot take a write (permissions, a read-only mount, a full disk).
    Reported only: a person fixes the mount or frees space."""
    from rldata.damage import check_room

    if "://" in store.root:
        return []
    out = []
    for name in schemas.TABLES:
        tdir = Path(store.uri(name))
        if tdir.is_dir():
            try:
                check_room(name, tdir)
            except RldataError as e:
                out.append(Finding("writable", name, 1, str(e)))
    return out


def _log_dir(store: Store, name: str) -> Path:
    return Path(store.uri(name).removeprefix("file://")) / "_delta_log"


def _dest(store: Store, what: str) -> Path:
    return Path(store.root) / _QUARANTINE / dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S") / what


def _template_log(store: Store, name: str, tmp: Path) -> Path:
    """A fresh empty table of ``name``'s schema (its first commit rebuilds a damaged version 0)."""
    from rldata.store import Store as _Store

    _Store(tmp)  # creates every table, as a new store would
    return tmp / name / "_delta_log"


def check_logs(store: Store, *, repair: bool) -> list[Finding]:
    """Checkpoint hint, checkpoint files and commit files of each (local) table's log."""
    import tempfile

    from rldata.damage import log_damage
    from rldata.damage import repair as fix

    if "://" in store.root:  # object stores: deltalake's own error names the table (Store._unreadable)
        return [Finding("log", n, 1, why) for n, why in store.damaged.items()]
    out = []
    for name in schemas.TABLES:
        seen: set[tuple] = set()
        while (bad := log_damage(name, _log_dir(store, name), full=True)) is not None:
            detail = f"{bad.path.name} {bad.why}"
            if bad.kind == "commit":
                later = [p for v, p in commit_files(bad.path.parent) if v > (bad.version or 0)]
                detail = (
                    f"version {bad.version} ({bad.path.name}) {bad.why}; {len(later)} later commit(s) intact"
                )
            key = (bad.kind, str(bad.path))
            if not repair or key in seen:
                out.append(Finding("log", name, 1, detail))
                break
            seen.add(key)
            try:
                with tempfile.TemporaryDirectory() as tmp:
                    template = _template_log(store, name, Path(tmp)) if bad.version == 0 else None
                    did = fix(bad, root=Path(store.root), dest=_dest(store, "log"), template_log=template)
            except (OSError, RldataError) as e:
                out.append(Finding("log", name, 1, f"{detail}; not repaired: {e}"))
                break
            out.append(Finding("log", name, 1, f"{detail}; {did}", True))
        if name in store.damaged and not any(f.table == name and not f.repaired for f in out):
            store.damaged.pop(name)
            try:
                store._check_log(name)
                store._ensure(name)
            except Exception as e:  # noqa: BLE001 - still unreadable: reported, the other tables go on
                store.damaged[name] = store._unreadable(name, e)
                out.append(Finding("log", name, 1, store.damaged[name]))
    return out


def check_data_files(store: Store, tables: list[str], *, repair: bool) -> list[Finding]:
    """Data files the current version needs that are missing, truncated or not Parquet.  Repair
    commits their removal (their rows are lost; every other row reads again) and moves them aside."""
    from rldata.damage import data_file_damage, repair_data_files

    if "://" in store.root:
        return []
    out = []
    for name in tables:
        tdir = Path(store.uri(name))
        bad = data_file_damage(name, tdir, store.table(name), full=True)
        if not bad:
            continue
        rows = sum(d.rows or 0 for d in bad)
        detail = f"{len(bad)} data file(s) unreadable ({rows} row(s)), e.g. {bad[0].path.name} {bad[0].why}"
        if repair:
            detail += "; " + repair_data_files(bad, Path(store.root), _dest(store, "data"))
            store.damaged.pop(name, None)
        out.append(Finding("data_files", name, len(bad), detail, repair))
    return out


def check_duplicates(store: Store, tables: list[str], *, repair: bool) -> list[Finding]:
    out = []
    for name in tables:
        key = schemas.get(name).key
        cols = ", ".join(key)
        n = store.sql(
            f"SELECT coalesce(sum(c - 1), 0) FROM (SELECT count(*) AS c FROM {name} GROUP BY {cols}) "
            "WHERE c > 1"
        ).fetchall()[0][0]
        if not n:
            continue
        if repair:
            df = store.read(name).unique(subset=list(key), keep="first", maintain_order=True)
            store.overwrite(name, df)
        out.append(Finding("duplicates", name, int(n), f"{n} row(s) repeat a key ({cols})", repair))
    return out


def check_orphans(store: Store, tables: list[str]) -> list[Finding]:
    if not {"trajectories", "verifications"} <= set(tables):
        return []
    out = []
    unverified = store.sql(
        "SELECT count(*) FROM trajectories t WHERE t.finish_reason IS DISTINCT FROM 'prompt_too_long' "
        "AND NOT EXISTS (SELECT 1 FROM verifications v WHERE v.traj_id = t.traj_id)"
    ).fetchall()[0][0]
    if unverified:
        out.append(
            Finding(
                "orphans",
                "trajectories",
                unverified,
                "trajectories without a verification (re-run rldata sample to verify them)",
            )
        )
    orphan = store.sql(
        "SELECT count(*) FROM verifications v WHERE NOT EXISTS "
        "(SELECT 1 FROM trajectories t WHERE t.traj_id = v.traj_id)"
    ).fetchall()[0][0]
    if orphan:
        out.append(Finding("orphans", "verifications", orphan, "verifications of no stored trajectory"))
    return out


def check_ledger(store: Store, tables: list[str], *, repair: bool) -> list[Finding]:
    """Ledger rows of sampled models (those with trajectories) against a recount of their samples."""
    from rldata.ledger import recompute_passrates

    if not {"passrates", "trajectories", "verifications"} <= set(tables):
        return []
    groups = store.sql(
        "SELECT DISTINCT p.model, p.params_hash FROM passrates p WHERE EXISTS (SELECT 1 FROM "
        "trajectories t WHERE t.model = p.model AND t.params_hash = p.params_hash) ORDER BY 1, 2"
    ).fetchall()
    if not groups:
        return []
    stored = store.read("passrates")
    wrong, fixes = 0, []
    for model, params_hash in groups:
        mine = stored.filter((pl.col("model") == model) & (pl.col("params_hash") == params_hash))
        fresh = recompute_passrates(
            store,
            model=model,
            params_hash=params_hash,
            verifier_keys=mine["verifier_key"].unique().to_list(),
            write=False,
        )
        want = {(r["task_id"], r["verifier_key"]): (r["n"], r["n_correct"], r["n_error"]) for r in fresh}
        for r in mine.iter_rows(named=True):
            k = (r["task_id"], r["verifier_key"])
            if k in want and want[k] != (r["n"], r["n_correct"], r["n_error"]):
                wrong += 1
                fixes += [f for f in fresh if (f["task_id"], f["verifier_key"]) == k]
    if not wrong:
        return []
    if repair:
        store.upsert("passrates", fixes)
    return [
        Finding("ledger", "passrates", wrong, "ledger rows disagree with a recount of their samples", repair)
    ]


def check_stuck_runs(store: Store, tables: list[str], *, repair: bool) -> list[Finding]:
    from rldata.runs import effective_status

    if "runs" not in tables:
        return []
    running = store.sql("SELECT * FROM runs WHERE status = 'running'").pl().to_dicts()
    dead = [r for r in running if effective_status(r) == "killed"]
    if not dead:
        return []
    if repair:
        now = dt.datetime.now(dt.UTC)
        store.upsert(
            "runs",
            [
                {
                    **r,
                    "status": "failed",
                    "ended_at": now,
                    "error": "killed: its process ended without recording an outcome "
                    "(marked by rldata doctor --repair)",
                }
                for r in dead
            ],
        )
    ids = ", ".join(r["run_id"] for r in dead[:5]) + (" ..." if len(dead) > 5 else "")
    return [
        Finding(
            "stuck_runs", "runs", len(dead), f"runs stored as running whose process is gone: {ids}", repair
        )
    ]


def check_stray(store: Store, *, repair: bool) -> list[Finding]:
    """Repair moves stray files into the quarantine directory (never deletes them)."""
    root = Path(store.root)
    if not root.is_dir():
        return []
    out = []
    dest = root / _QUARANTINE / dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S") / "stray"
    extra = sorted(p for p in root.iterdir() if p.name not in schemas.TABLES and p.name != _QUARANTINE)
    if extra:
        detail = "not a table: " + ", ".join(p.name for p in extra[:5])
        if repair:
            _move(extra, root, dest)
            detail += f"; moved to {dest}"
        out.append(Finding("stray", "-", len(extra), detail, repair))
    for name in schemas.TABLES:
        tdir = root / name
        if not tdir.is_dir() or name in store.damaged:
            continue
        added = _ever_added(tdir / "_delta_log") | _current_files(store, name)
        stray = sorted(
            p
            for p in tdir.rglob("*")
            if p.is_file() and "_delta_log" not in p.parts and p.relative_to(tdir).as_posix() not in added
        )
        if stray:
            detail = "files no commit added: " + ", ".join(p.relative_to(tdir).as_posix() for p in stray[:5])
            if repair:
                _move(stray, root, dest)
                detail += f"; moved to {dest}"
            out.append(Finding("stray", name, len(stray), detail, repair))
    return out


def _move(paths: list[Path], root: Path, dest: Path) -> None:
    for p in paths:
        target = dest / p.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(p), target)


def _current_files(store: Store, name: str) -> set[str]:
    """The current version's files (they may predate the oldest JSON commit kept after a checkpoint)."""
    from urllib.parse import unquote

    base = store.uri(name).removeprefix("file://").rstrip("/") + "/"
    return {unquote(u.removeprefix("file://")).removeprefix(base) for u in store.table(name).file_uris()}


def _ever_added(log_dir: Path) -> set[str]:
    """Paths of every data file any readable commit of the log added (relative to the table)."""
    from urllib.parse import unquote

    paths = set()
    for _, path in commit_files(log_dir):
        for line in path.read_bytes().splitlines():
            try:
                action = json.loads(line)
            except ValueError:
                continue
            if isinstance(action, dict) and isinstance(action.get("add"), dict):
                paths.add(unquote(action["add"].get("path", "")))
    return paths
