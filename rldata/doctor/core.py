"""``rldata doctor``: check every table and the invariants between them; with ``repair``, fix what
can be fixed without guessing.

Checks (each a plain function returning :class:`Finding` rows):

- ``log``: a damaged checkpoint hint, checkpoint or commit file of a table's Delta log.  Repair moves
  the file into ``.rldata-doctor/`` at the store root (kept for inspection) and rebuilds a commit
  from what can be trusted of it (:mod:`rldata.store.salvage`: every add whose file is intact), keeping
  every later commit.
- ``duplicates``: rows sharing a table's key.  Repair rewrites the table keeping the first of each.
- ``orphans``: trajectories without a verification, and verifications without a trajectory.  Reported
  only: ``rldata sample`` re-verifies the former when run again; the latter need a person.
- ``ledger``: ``passrates`` rows that disagree with a fresh recount of the stored verifications.
  Repair upserts the recount.
- ``stuck_runs``: runs stored as ``running`` whose owner is gone (:func:`rldata.runs.core.effective_status`).
  Repair marks them ``failed`` with the reason.
- ``unrecorded_ingest``: a ``tasks`` commit tagged with an ingest's run id (:mod:`rldata.store.run_commits`)
  whose run has no ``runs`` row (the run's write failed after its tasks landed).  Repair records the
  run, ``done``, from the tag and the commit's row count.
- ``stray``: files at the store root or in a table directory that belong to no table.  Repair moves
  them into the quarantine directory.
- ``unreferenced`` / ``leftover``: data files no commit references, told apart by their rows
  (:func:`check_stray`): one that holds rows the table lacks is a problem and never moved (it may be
  their only copy); one whose rows the table holds, an incomplete one, or a killed commit's
  temporary file is listed for information, and repair moves it once it is an hour old.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl

from rldata.console import progress
from rldata.doctor.remote import RemoteFiles, mirrored_log, move_aside, object_sizes, remote_fs
from rldata.errors import RldataError
from rldata.ledger.core import recompute_passrates
from rldata.runs.core import effective_status, resume_hint
from rldata.schemas import TABLES
from rldata.schemas import get as table_schema
from rldata.store import run_commits
from rldata.store.core import Store
from rldata.store.core import Store as _Store
from rldata.store.damage import check_room, commit_files, data_file_damage, log_damage, repair_data_files
from rldata.store.damage import repair as fix
from rldata.store.salvage import LocalFiles, classify

__all__ = ["Finding", "doctor"]

from rldata.store.damage import QUARANTINE as _QUARANTINE


@dataclass(frozen=True)
class Finding:
    check: str
    table: str
    count: int
    detail: str
    repaired: bool = False
    problem: bool = True  # False: listed for information (the exit status ignores it)

    def row(self) -> dict:
        return {
            "check": self.check,
            "table": self.table,
            "count": self.count,
            "detail": self.detail,
            "repaired": self.repaired,
        }


def doctor(store: Store, *, repair: bool = False) -> list[Finding]:
    """Run every check (repairing first what the later checks need: a readable log).  Progress: one
    step per table for the per-table checks (logs, data files, duplicates), one per check after."""
    n = len(TABLES)
    with progress("doctor", total=3 * n + 7, unit="checks") as bar:
        found = check_logs(store, repair=repair, bar=bar)
        readable = [t for t in TABLES if t not in store.damaged]
        found += check_data_files(store, readable, repair=repair, bar=bar)
        bar.advance(n - len(readable))
        readable = [t for t in readable if t not in {f.table for f in found if not f.repaired}]
        found += check_duplicates(store, readable, repair=repair, bar=bar)
        bar.advance(n - len(readable))
        for name, check in (
            ("orphans", lambda: check_orphans(store, readable)),
            ("ledger", lambda: check_ledger(store, readable, repair=repair)),
            ("stuck runs", lambda: check_stuck_runs(store, readable, repair=repair)),
            ("partial imports", lambda: check_partial_imports(store, readable)),
            ("unrecorded ingests", lambda: check_unrecorded_ingest(store, readable, repair=repair)),
            ("stray files", lambda: check_stray(store, repair=repair)),
            ("writable", lambda: check_writable(store)),
        ):
            found += check()
            bar.advance(1, note=name)
    return found


class _NoBar:
    def advance(self, n: int = 1, *, note: str | None = None, **extra) -> None:
        pass


_NO_BAR = _NoBar()  # a check called alone (not from doctor()) reports no progress


def check_writable(store: Store) -> list[Finding]:
    """Tables whose directory cannot take a write (permissions, a read-only mount, a full disk).
    Reported only: a person fixes the mount or frees space."""
    if "://" in store.root:
        return []
    out = []
    for name in TABLES:
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


def _template_log(name: str, tmp: Path) -> Path:
    """A fresh empty table of ``name``'s schema (its first commit rebuilds a damaged version 0)."""
    _Store(tmp)  # creates every table, as a new store would
    return tmp / name / "_delta_log"


def check_logs(store: Store, *, repair: bool, bar=_NO_BAR) -> list[Finding]:
    """Checkpoint hint, checkpoint files and commit files of each table's log (on object storage, of a
    local copy of it: :mod:`rldata.doctor.remote`)."""
    out = []
    remote = "://" in store.root
    for name in TABLES:
        bar.advance(1, note=f"log {name}")
        if remote:
            root = None
            try:
                with mirrored_log(store, name) as (root, push):
                    files = RemoteFiles(store, name)
                    found = _log_findings(name, root, root / _stamp() / "log", repair=repair, files=files)
                    if any(f.repaired for f in found):
                        push()
            except (OSError, RldataError) as e:
                found = [Finding("log", name, 1, f"the log could not be checked or repaired: {e}")]
            out += [_relocated(f, root, store.root) for f in found] if root is not None else found
        else:
            out += _log_findings(name, Path(store.root), _dest(store, "log"), repair=repair)
        if name in store.damaged and not any(f.table == name and not f.repaired for f in out):
            store.damaged.pop(name)
            try:
                store._check_log(name)
                store._ensure(name)
            except Exception as e:  # noqa: BLE001 - still unreadable: reported, the other tables go on
                store.damaged[name] = store._unreadable(name, e)
                out.append(Finding("log", name, 1, store.damaged[name]))
    return out


def _stamp() -> str:
    return f"{_QUARANTINE}/{dt.datetime.now(dt.UTC).strftime('%Y%m%d-%H%M%S')}"


def _relocated(f: Finding, local_root: Path, store_root: str) -> Finding:
    """A finding made on a local copy of a remote log, with the copy's paths shown as the store's."""
    detail = f.detail.replace(str(local_root), store_root.rstrip("/"))
    return Finding(f.check, f.table, f.count, detail, f.repaired, f.problem)


def _log_findings(name: str, root: Path, dest: Path, *, repair: bool, files=None) -> list[Finding]:
    """Find (and with ``repair`` fix, moving what is replaced under ``dest``) the damage of table
    ``name``'s log under the store directory ``root``; one finding per damaged file.  ``files``: the
    table's data files where they are not under ``root`` (object storage: :mod:`rldata.store.salvage`)."""
    import tempfile

    out: list[Finding] = []
    seen: set[tuple] = set()
    log_dir = root / name / "_delta_log"
    while (bad := log_damage(name, log_dir, full=True)) is not None:
        detail = f"{bad.path.name} {bad.why}"
        if bad.kind == "commit":
            later = [p for v, p in commit_files(bad.path.parent) if v > (bad.version or 0)]
            detail = f"version {bad.version} ({bad.path.name}) {bad.why}; {len(later)} later commit(s) intact"
        key = (bad.kind, str(bad.path))
        if not repair or key in seen:
            out.append(Finding("log", name, 1, detail))
            break
        seen.add(key)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                template = _template_log(name, Path(tmp)) if bad.version == 0 else None
                key = table_schema(name).key
                did = fix(bad, root=root, dest=dest, template_log=template, files=files, key=key)
        except (OSError, RldataError) as e:
            out.append(Finding("log", name, 1, f"{detail}; not repaired: {e}"))
            break
        out.append(Finding("log", name, 1, f"{detail}; {did}", True))
    return out


def check_data_files(store: Store, tables: list[str], *, repair: bool, bar=_NO_BAR) -> list[Finding]:
    """Data files the current version needs that are missing, truncated or not Parquet.  Repair
    commits their removal (their rows are lost; every other row reads again) and moves them aside."""
    out = []
    for name in tables:
        bar.advance(1, note=f"data files {name}")
        if "://" in store.root:
            out += _remote_data_files(store, name, repair=repair)
            continue
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


def _remote_data_files(store: Store, name: str, *, repair: bool) -> list[Finding]:
    """check_data_files on object storage: sizes from the listing; the removal commit is written on a
    local copy of the log and pushed, the damaged objects copied aside and deleted."""
    sizes = object_sizes(store, name)
    bad = data_file_damage(name, Path(name), store.table(name), sizes=sizes)  # paths relative to the root
    if not bad:
        return []
    rows = sum(d.rows or 0 for d in bad)
    detail = f"{len(bad)} data file(s) unreadable ({rows} row(s)), e.g. {bad[0].path.name} {bad[0].why}"
    if not repair:
        return [Finding("data_files", name, len(bad), detail)]
    stamp = _stamp()
    try:
        with mirrored_log(store, name) as (root, push):
            local = [replace(d, path=root / d.path) for d in bad]
            did = repair_data_files(local, root, root / stamp / "data")
            rels = [d.path.relative_to(root).as_posix() for d in local]
            moved = move_aside(store, rels, f"{stamp}/data")
            push()
    except (OSError, RldataError) as e:
        return [Finding("data_files", name, len(bad), f"{detail}; not repaired: {e}")]
    where = f", moved {moved} to {store.root.rstrip('/')}/{stamp}/data" if moved else ""
    store.damaged.pop(name, None)
    return [Finding("data_files", name, len(bad), f"{detail}; {did}{where}", True)]


def check_duplicates(store: Store, tables: list[str], *, repair: bool, bar=_NO_BAR) -> list[Finding]:
    out = []
    con = store.connect(tables)  # one DuckDB database for every table's query, not one each
    for name in tables:
        bar.advance(1, note=f"duplicates {name}")
        key = table_schema(name).key
        cols = ", ".join(key)
        n = con.sql(
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
    kind = "(SELECT any_value(r.kind) FROM runs r WHERE r.run_id = t.run_id)" if "runs" in tables else "NULL"
    by_run = store.sql(
        f"SELECT t.run_id, {kind}, count(*) FROM trajectories t "
        "WHERE t.finish_reason IS DISTINCT FROM 'prompt_too_long' "
        "AND NOT EXISTS (SELECT 1 FROM verifications v WHERE v.traj_id = t.traj_id) GROUP BY 1, 2 ORDER BY 3 DESC"
    ).fetchall()
    unverified = sum(n for _, _, n in by_run)
    if unverified:
        # a training run verifies its rollouts when resumed; a sampling job's are verified by a re-run
        hints = sorted({resume_hint(kind if kind == "train" else "sample", run) for run, kind, _ in by_run})
        detail = f"trajectories without a verification; to verify them run {'; '.join(hints[:3])}"
        out.append(Finding("orphans", "trajectories", unverified, detail))
    orphan = store.sql(
        "SELECT count(*) FROM verifications v WHERE NOT EXISTS "
        "(SELECT 1 FROM trajectories t WHERE t.traj_id = v.traj_id)"
    ).fetchall()[0][0]
    if orphan:
        out.append(Finding("orphans", "verifications", orphan, "verifications of no stored trajectory"))
    return out


def check_ledger(store: Store, tables: list[str], *, repair: bool) -> list[Finding]:
    """Ledger rows of sampled models (those with trajectories) against a recount of their samples."""
    if not {"passrates", "trajectories", "verifications"} <= set(tables):
        return []
    groups = store.sql(
        "SELECT DISTINCT p.model, p.params_hash FROM passrates p WHERE EXISTS (SELECT 1 FROM "
        "trajectories t WHERE t.model = p.model AND t.params_hash = p.params_hash) ORDER BY 1, 2"
    ).fetchall()
    if not groups:
        return []
    stored = store.read("passrates")
    wrong, missing, fixes = 0, 0, []
    for model, params_hash in groups:
        mine = stored.filter((pl.col("model") == model) & (pl.col("params_hash") == params_hash))
        fresh = recompute_passrates(
            store,
            model=model,
            params_hash=params_hash,
            verifier_keys=mine["verifier_key"].unique().to_list(),
            write=False,
        )
        have = {
            (r["task_id"], r["verifier_key"], r["env_version"]): (r["n"], r["n_correct"], r["n_error"])
            for r in mine.iter_rows(named=True)
        }
        for f in fresh:  # every recounted row: a stored row that disagrees, or none (lost to a kill)
            k = (f["task_id"], f["verifier_key"], f["env_version"])
            if k not in have:
                missing += 1
                fixes.append(f)
            elif have[k] != (f["n"], f["n_correct"], f["n_error"]):
                wrong += 1
                fixes.append(f)
    if repair and fixes:
        store.upsert("passrates", fixes)
    out = []
    if wrong:
        out.append(
            Finding(
                "ledger", "passrates", wrong, "ledger rows disagree with a recount of their samples", repair
            )
        )
    if missing:
        detail = "sampled tasks with no ledger row (a killed run's last update), from a recount"
        out.append(Finding("ledger_missing", "passrates", missing, detail, repair))
    return out


def check_stuck_runs(store: Store, tables: list[str], *, repair: bool) -> list[Finding]:
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
    said = "; ".join(f"{r['run_id']} ({r['kind']}: {resume_hint(r['kind'], r['run_id'])})" for r in dead[:5])
    more = " ..." if len(dead) > 5 else ""
    what = "marked failed" if repair else "to finish their work run"
    detail = f"runs stored as running whose process is gone, {what}: {said}{more}"
    return [Finding("stuck_runs", "runs", len(dead), detail, repair)]


# a data file, or the staged copy of one (``NAME#1``: written, not yet renamed into place)
_PARQUET = re.compile(r"(.*/)?[^/]+\.parquet(#\d+)?")
# the staged copy of a commit (deltalake creates ``NNN.json#1`` and links it to ``NNN.json``: a kill
# in between leaves it, often empty); a doctor repair's own staged commit
_TEMP_COMMIT = re.compile(r"_delta_log/(\d{20}\.json#\d+|\.\d{20}\.json\.rldata-doctor\.tmp)")
_IN_FLIGHT_S = 3600  # a data file younger than this may belong to a write that is committing now


def check_partial_imports(store: Store, tables: list[str]) -> list[Finding]:
    """Import runs that failed (or were killed) while writing: tasks, trajectories and
    verifications are three commits, so part of it may have landed.  The compensating step is a
    re-run on the same input (same run id; keyed writes add only what is missing, then the run
    reads ``done``).  Reported only."""
    if "runs" not in tables:
        return []
    rows = store.sql("SELECT * FROM runs WHERE kind = 'import' AND status <> 'done'").pl().to_dicts()
    bad = [r["run_id"] for r in rows if r["status"] == "failed" or effective_status(r) == "killed"]
    if not bad:
        return []
    ids = ", ".join(bad[:5]) + (" ..." if len(bad) > 5 else "")
    detail = f"import runs that stopped part-way ({ids}): re-run rldata import-rollouts on the same input"
    return [Finding("partial_import", "runs", len(bad), detail)]


def check_unrecorded_ingest(store: Store, tables: list[str], *, repair: bool) -> list[Finding]:
    """Tasks commits whose ingest run never got its ``runs`` row (the module docstring)."""
    if not {"tasks", "runs"} <= set(tables):
        return []
    missing = run_commits.unrecorded(store)
    if not missing:
        return []
    if repair:
        run_commits.record(store, missing)
    said = ", ".join(f"version {t['version']} (run {t['run_id']})" for t in missing[:5])
    more = " ..." if len(missing) > 5 else ""
    what = "recorded them as done" if repair else "rldata doctor --repair records them as done"
    detail = f"tasks commits of an ingest whose run was never recorded: {said}{more}; {what}"
    return [Finding("unrecorded_ingest", "tasks", len(missing), detail, repair)]


def check_stray(store: Store, *, repair: bool) -> list[Finding]:
    """Files that belong to no table (``stray``: a problem), and files in a table no commit added.

    A data file no commit references is read (:func:`rldata.store.salvage.classify`):

    - ``leftover`` (listed, not a problem) when the table holds every key of its rows (a commit that
      lost a race and was retried, or a killed write whose job ran again), when it is no readable
      Parquet (a write killed before the file was complete), or for a killed commit's temporary file
      in the log (``NNN.json#1``, often 0 bytes).  Repair moves those older than an hour (a younger
      one may be a write about to commit) into the quarantine directory;
    - ``unreferenced`` (a problem) when it holds rows the table lacks: the adds of a damaged commit
      that could not be recovered, or a write killed before its commit.  Never moved: it may be the
      only copy of those rows (re-run the killed job, whose keyed writes add them).

    On an object store the moves are a copy under the quarantine prefix, then a delete."""
    local = "://" not in store.root
    files = _listing(store)
    if files is None:
        return []
    out = []
    stamp = _stamp()
    dest = _dest(store, "stray") if local else f"{store.root.rstrip('/')}/{stamp}/stray"

    def move(rels: list[str]) -> None:  # paths relative to the store root
        if local:
            _move([Path(store.root) / r for r in rels], Path(store.root), Path(dest))
        else:
            move_aside(store, rels, f"{stamp}/stray")

    tops = {rel.split("/", 1)[0] for rel, _, _ in files}
    extra = sorted(t for t in tops if t not in TABLES and t != _QUARANTINE)
    if local:
        extra = sorted(
            p.name for p in Path(store.root).iterdir() if p.name not in TABLES and p.name != _QUARANTINE
        )
    if extra:
        detail = "not a table: " + ", ".join(extra[:5])
        if repair:
            move(extra if local else [r for r, _, _ in files if r.split("/", 1)[0] in extra])
            detail += f"; moved to {dest}"
        out.append(Finding("stray", "-", len(extra), detail, repair))
    now = time.time()
    for name in TABLES:
        if name in store.damaged:
            continue
        mine = [
            (rel.split("/", 1)[1], size, mtime) for rel, size, mtime in files if rel.startswith(name + "/")
        ]
        temps = [f for f in mine if _TEMP_COMMIT.fullmatch(f[0])]
        # a write's own probe file (rldata.store.damage.check_room) lives for a moment: not a stray
        mine = [f for f in mine if not f[0].startswith(("_delta_log/", ".rldata-probe-"))]
        if not mine and not temps:
            continue
        added = _ever_added(store, name) | _current_files(store, name)
        unknown = [f for f in mine if f[0] not in added]
        stray = [f for f in unknown if not _PARQUET.fullmatch(f[0])]
        found: dict[str, list] = {"superseded": [], "unreadable": [], "only_copy": [], "foreign": []}
        lacking = 0
        if len(stray) < len(unknown):
            key = list(table_schema(name).key)
            held = store.scan(name).select(key).collect()
            reader = LocalFiles(Path(store.uri(name))) if local else _remote_files(store, name)
            for f in unknown:
                if _PARQUET.fullmatch(f[0]):
                    kind, rows, lack = classify(reader, f[0], key, held)
                    found[kind].append((*f, rows, lack))
                    lacking += lack
        stray += [f[:3] for f in found["foreign"]]
        if stray:
            detail = "files no commit added: " + ", ".join(f[0] for f in stray[:5])
            if repair:
                move([f"{name}/{f[0]}" for f in stray])
                detail += f"; moved to {dest}"
            out.append(Finding("stray", name, len(stray), detail, repair))
        if found["only_copy"]:
            only = found["only_copy"]
            young = sum(now - f[2] <= _IN_FLIGHT_S for f in only)
            detail = (
                f"{len(only)} data file(s) no commit references hold {lacking} row(s) the table lacks (a "
                "write killed before its commit, or adds of a damaged commit that could not be recovered), "
                f"e.g. {only[0][0]}; left in place (the only copy of those rows): re-run the job that wrote "
                "them"
                + (
                    f"; {young} written in the last hour (a write may be about to commit them)"
                    if young
                    else ""
                )
            )
            out.append(Finding("unreferenced", name, len(only), detail))
        left = found["superseded"] + found["unreadable"]
        if left or temps:
            parts = []
            if found["superseded"]:
                parts.append(
                    f"{len(found['superseded'])} data file(s) whose rows the table holds (a retried or "
                    "killed write that landed since)"
                )
            if found["unreadable"]:
                parts.append(f"{len(found['unreadable'])} incomplete data file(s) (a write killed mid-file)")
            if temps:
                parts.append(
                    f"{len(temps)} temporary commit file(s) a killed commit left "
                    f"({', '.join(f'{f[0]} ({f[1]} bytes)' for f in temps[:3])})"
                )
            every = [f[:3] for f in left] + temps
            size = sum(f[1] for f in every)
            detail = f"{'; '.join(parts)}: {size:,} bytes, harmless (no reader sees them)"
            if left:
                detail += f", e.g. {left[0][0]}"
            old = [f for f in every if now - f[2] > _IN_FLIGHT_S]
            moved = repair and bool(old)
            if moved:
                move([f"{name}/{f[0]}" for f in old])
                detail += f"; moved {len(old)} older than an hour to {dest}"
            elif not repair:
                detail += "; rldata doctor --repair moves those older than an hour"
            out.append(Finding("leftover", name, len(every), detail, moved, problem=False))
    return out


def _remote_files(store: Store, name: str):
    return RemoteFiles(store, name)


def _listing(store: Store) -> list[tuple[str, int, float]] | None:
    """(path relative to the store root, size, mtime) of every file under it; None if it cannot be listed."""
    if "://" not in store.root:
        root = Path(store.root)
        if not root.is_dir():
            return None
        out = []
        for p in root.rglob("*"):
            rel = p.relative_to(root).as_posix()
            if p.is_file() and not rel.startswith(_QUARANTINE + "/"):
                st = p.stat()
                out.append((rel, st.st_size, st.st_mtime))
        return out
    import pyarrow.fs as pafs

    fs, base = _remote_fs(store)
    infos = fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    return [
        (i.path[len(base) + 1 :], i.size or 0, i.mtime.timestamp() if i.mtime else 0.0)
        for i in infos
        if i.type == pafs.FileType.File
    ]


def _remote_fs(store: Store):
    return remote_fs(store)


def _move(paths: list[Path], root: Path, dest: Path) -> None:
    for p in paths:
        target = dest / p.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(p), target)


def _current_files(store: Store, name: str) -> set[str]:
    """The current version's files (they may predate the oldest JSON commit kept after a checkpoint)."""
    from urllib.parse import unquote

    base = store.uri(name).removeprefix("file://").rstrip("/") + "/"
    out = set()
    for u in store.table(name).file_uris():
        u = unquote(u.removeprefix("file://"))
        out.add(u.split(base.split("://", 1)[-1], 1)[-1] if "://" in base else u.removeprefix(base))
    return out


def _ever_added(store: Store, name: str) -> set[str]:
    """Paths of every data file any readable commit of the table's log added (relative to the table)."""
    from urllib.parse import unquote

    if "://" not in store.root:
        blobs = [p.read_bytes() for _, p in commit_files(_log_dir(store, name))]
    else:
        fs, base = _remote_fs(store)
        blobs = []
        for rel, _, _ in _listing(store) or []:
            if rel.startswith(f"{name}/_delta_log/") and re.fullmatch(r"\d{20}\.json", rel.rsplit("/", 1)[1]):
                with fs.open_input_stream(f"{base}/{rel}") as f:
                    blobs.append(f.read())
    paths = set()
    for blob in blobs:
        for line in blob.splitlines():
            try:
                action = json.loads(line)
            except ValueError:
                continue
            if isinstance(action, dict) and isinstance(action.get("add"), dict):
                paths.add(unquote(action["add"].get("path", "")))
    return paths
