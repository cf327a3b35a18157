"""Upgrading a store written by the previous release (tests/data/stores/v4, made by commit ``5291bef``,
whose params hash included N) to trajectories 4 / passrates 5: every row of that release gets the hash
without N, ledger rows of one task under two N merge into one row recounted from the distinct samples
(two jobs drew samples 0..3 twice, under two traj_ids), and nothing is lost."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

from rldata import open_store, schemas
from rldata.configs.sampling import SamplingSpec
from rldata.doctor.core import check_ledger
from rldata.jobs.sample_stored import first_missing, stored_samples, stored_status
from rldata.ledger.core import recompute_passrates
from rldata.ledger.select import selection_rules
from rldata.stats import wilson_interval
from rldata.store.migrate import STEPS, VERSION_KEY, table_version
from rldata.store.rehash import current_hash, legacy_hash

V4 = Path(__file__).parents[1] / "data" / "stores" / "v4"
MODEL = "tiny-arith@0123456789ab"
N4, N8 = SamplingSpec(n=4, max_tokens=8, seed=0), SamplingSpec(n=8, max_tokens=8, seed=0)
HOT = SamplingSpec(n=4, temperature=0.5, max_tokens=8, seed=0)
# fields added to SamplingSpec after that release: its stored JSON (and so its hash) never held them
ADDED_SINCE = ("chat_template",)


def _as_that_release_stored(spec: SamplingSpec) -> dict:
    return {k: v for k, v in spec.to_dict().items() if k not in ADDED_SINCE}


# the hashes the previous release stored (N included) and today's (N left out)
OLD4, OLD8, OLD_HOT = (legacy_hash(_as_that_release_stored(s)) for s in (N4, N8, HOT))
NEW, NEW_HOT = N8.params_hash, HOT.params_hash
LOST = "0000feedbeef0000"  # a ledger row no trajectory explains


@pytest.fixture
def v4(tmp_path) -> Path:
    root = tmp_path / "v4"
    shutil.copytree(V4, root)
    return root


def _before(root: Path, name: str) -> pl.DataFrame:
    return pl.from_arrow(DeltaTable(str(root / name)).to_pyarrow_table())


def _sorted(df: pl.DataFrame, key) -> list[dict]:
    return sorted(df.to_dicts(), key=lambda r: tuple(str(r[k]) for k in key))


def _tasks(root: Path) -> list[str]:
    return sorted(_before(root, "tasks")["task_id"].to_list())  # A, B, C (calculator), D


def test_the_fixture_is_a_version_4_store_with_n_in_its_hashes(v4):
    assert table_version(DeltaTable(str(v4 / "trajectories"))) == 3
    assert table_version(DeltaTable(str(v4 / "passrates"))) == 4
    assert table_version(DeltaTable(str(v4 / "selections"))) == 2
    assert OLD4 != OLD8 and N4.params_hash == N8.params_hash  # the point of the upgrade
    traj = _before(v4, "trajectories")
    assert set(traj["params_hash"]) == {OLD4, OLD8, OLD_HOT, "imported"}
    assert set(_before(v4, "passrates")["params_hash"]) == {OLD4, OLD8, OLD_HOT, LOST}


def test_opening_rehashes_every_old_row_and_keeps_every_other_cell(v4):
    before = {n: _before(v4, n) for n in schemas.TABLES if (v4 / n).exists()}
    store = open_store(v4)
    for name, ts in schemas.TABLES.items():
        assert table_version(store.table(name)) == ts.version, name
        if name not in before:  # a table added after this release: created empty on open
            assert store.count(name) == 0, name
            continue
        if name in ("trajectories", "passrates"):
            continue
        # untouched tables, selections included: every row, every cell
        after = store.read(name)
        assert _sorted(after, ts.key) == _sorted(before[name].select(after.columns), ts.key), name
    traj, old = store.read("trajectories"), before["trajectories"]
    assert traj.height == old.height == 46
    # every cell but the hash is the same, traj_ids included (ids are opaque)
    cols = [c for c in traj.columns if c != "params_hash"]
    # (trajectories 5 gave each message tool_calls and tool_call_id: null in every old turn)
    turns = [c for c in cols if c != "messages"]
    assert _sorted(traj.select(cols), ["traj_id"]) == _sorted(
        old.select(turns).join(traj.select("traj_id", "messages"), on="traj_id"), ["traj_id"]
    )
    for r_new, r_old in zip(
        _sorted(traj.select("traj_id", "messages"), ["traj_id"]),
        _sorted(old.select("traj_id", "messages"), ["traj_id"]),
    ):
        new_msgs = r_new["messages"]
        assert (
            None if new_msgs is None else [{"role": m["role"], "content": m["content"]} for m in new_msgs]
        ) == r_old["messages"]
        assert new_msgs is None or all(
            m["tool_calls"] is None and m["tool_call_id"] is None for m in new_msgs
        )
    for r in traj.to_dicts():
        if r["sampling_params"] is None:
            assert r["params_hash"] == "imported"  # no params to recover: kept as it was
        else:
            assert r["params_hash"] == SamplingSpec(**json.loads(r["sampling_params"])).params_hash
    assert dict(traj.group_by("params_hash").len().iter_rows()) == {NEW: 40, NEW_HOT: 4, "imported": 2}
    assert open_store(v4).versions() == store.versions()  # reopening commits nothing


def test_ledger_rows_of_one_task_under_two_n_merge_into_one_recount(v4):
    a, b, c, d = _tasks(v4)
    old = {(r["task_id"], r["params_hash"], r["env_version"]): r for r in _before(v4, "passrates").to_dicts()}
    store = open_store(v4)
    pr = store.read("passrates")
    assert pr.height == 6 and not pr.select(schemas.get("passrates").key).is_duplicated().any()
    got = {(r["task_id"], r["params_hash"], r["env_version"]): r for r in pr.to_dicts()}
    assert set(got) == {
        (a, NEW, ""),
        (b, NEW, ""),
        (c, NEW, "calculator@1"),
        (d, NEW, ""),
        (a, NEW_HOT, ""),
        (a, LOST, ""),
    }

    # rows that merged nothing: every cell as it was, the hash mapped (or kept, for the lost one)
    for new_key, old_key in {
        (d, NEW, ""): (d, OLD8, ""),  # the adaptive row: its stopping-rule columns come through
        (a, NEW_HOT, ""): (a, OLD_HOT, ""),
        (a, LOST, ""): (a, LOST, ""),
    }.items():
        assert got[new_key] == {**old[old_key], "params_hash": new_key[1]}, new_key
    assert (got[(d, NEW, "")]["stop_rule"], got[(d, NEW, "")]["n_max"]) == ("exact", 8)

    # merged rows: counts of the distinct samples (not the sum of the old rows), the rest from the
    # row that drew most (the N=8 job's)
    def counts(key):
        r = got[key]
        return r["n"], r["n_correct"], r["n_error"]

    # A: samples 0..7 of seed 0 (0..3 drawn twice; the N=4 copy of sample 1 timed out, the N=8 copy
    # passed: it counts as passed); sample 5 errored; sample 2 wrong
    assert (old[(a, OLD4, "")]["n"], old[(a, OLD8, "")]["n"]) == (3, 7)
    assert counts((a, NEW, "")) == (7, 6, 1)
    assert counts((c, NEW, "calculator@1")) == (8, 6, 0)  # the environment key merged the same way
    assert counts((b, NEW, "")) == (12, 9, 0)  # seed 0 (8) and seed 1 (4): disjoint samples, all count
    for key, was in (
        ((a, NEW, ""), (a, OLD8, "")),
        ((b, NEW, ""), (b, OLD8, "")),
        ((c, NEW, "calculator@1"), (c, OLD8, "calculator@1")),
    ):
        r = got[key]
        lo, hi = wilson_interval(r["n_correct"], r["n"])
        assert r["pass_rate"] == r["n_correct"] / r["n"] and (r["ci_low"], r["ci_high"]) == (lo, hi)
        same = ("run_id", "updated_at", "stop_rule", "alpha", "confidence", "n_max", "band", "model")
        assert {k: r[k] for k in same} == {k: old[was][k] for k in same} and r["run_id"] == "run-n8"
    # the pooled ledger is what today's recount gives, and doctor finds nothing to repair
    fresh = recompute_passrates(store, model=MODEL, params_hash=NEW, verifier_keys=["math@1"], write=False)
    assert {(r["task_id"], r["env_version"]): (r["n"], r["n_correct"], r["n_error"]) for r in fresh} == {
        (t, e): counts((t, NEW, e)) for t, _, e in got if _ == NEW
    }
    assert check_ledger(store, list(schemas.TABLES), repair=False) == []


def test_a_selection_made_before_the_upgrade_keeps_its_slice(v4):
    store = open_store(v4)
    sel = store.read("selections")
    assert set(sel["params_hash"]) == {OLD8}  # the slice as passrates spelled it at the pinned version
    assert current_hash(store, OLD8) == NEW and current_hash(store, LOST) == LOST
    assert json.loads(sel["params"][0])["params_hash"] == OLD8
    rules = selection_rules(store, "band")  # reads passrates at the pinned version, by the old hash
    d = _tasks(v4)[3]
    assert rules.height == 3 and {r["task_id"]: r["decided_by"] for r in rules.to_dicts()}[d] == "exact"


def test_a_fixed_n_job_sees_the_upgraded_samples_as_its_own(v4):
    a, b, c, d = _tasks(v4)
    store = open_store(v4)
    ekeys = {c: "calculator@1"}
    kw = {"model": MODEL, "params_hash": NEW, "seed": 0, "vkeys": {"math@1"}, "ekeys": ekeys}
    status = {
        r["task_id"]: (r["k"], r["kv"]) for r in stored_status(store, [a, b, c, d], n=8, **kw).to_dicts()
    }
    # indices, not rows: A holds 12 rows for samples 0..7; an N=8 job has nothing to draw for A, B, C
    assert status == {a: (8, 8), b: (8, 8), c: (8, 8), d: (4, 4)}
    assert stored_status(store, [a], n=4, **kw).to_dicts() == [{"task_id": a, "k": 4, "kv": 4}]
    stored = stored_samples(store, [a, d], **kw)
    assert first_missing(stored[a], 16) == 8 and first_missing(stored[d], 8) == 4
    assert all(v[2] for v in stored[a].values())  # of two copies of a sample, the verified one
    seed1 = stored_status(store, [b], n=8, **{**kw, "seed": 1}).to_dicts()
    assert seed1 == [{"task_id": b, "k": 4, "kv": 4}]  # another seed's samples are other samples


def test_an_interrupted_upgrade_resumes(v4):
    # killed after the trajectories rewrite, before its version was recorded: the step runs again
    STEPS[("trajectories", 3)](DeltaTable(str(v4 / "trajectories")))
    assert table_version(DeltaTable(str(v4 / "trajectories"))) == 3
    v = DeltaTable(str(v4 / "trajectories")).version()
    STEPS[("trajectories", 3)](DeltaTable(str(v4 / "trajectories")))  # nothing left to rewrite
    assert DeltaTable(str(v4 / "trajectories")).version() == v
    store = open_store(v4)
    first = _sorted(store.read("passrates"), schemas.get("passrates").key)
    # killed after the passrates rewrite, before its version was recorded
    DeltaTable(str(v4 / "passrates")).alter.set_table_description(f"{VERSION_KEY}=4")
    store = open_store(v4)
    assert table_version(store.table("passrates")) == schemas.get("passrates").version
    assert _sorted(store.read("passrates"), schemas.get("passrates").key) == first


def test_a_row_appended_during_the_rehash_is_not_left_behind(v4):
    # an old writer commits between the rehash's read and its commit: the rewrite must not land
    dtable = DeltaTable(str(v4 / "trajectories"))
    late = DeltaTable(str(v4 / "trajectories")).to_pyarrow_table()
    late = late.filter(pc.equal(late["params_hash"], OLD4)).slice(0, 1)
    write_deltalake(
        str(v4 / "trajectories"), late.set_column(0, "traj_id", pa.array(["late"])), mode="append"
    )
    with pytest.raises(Exception, match="(?i)concurrent|commit"):
        STEPS[("trajectories", 3)](dtable)  # its snapshot predates the append
    store = open_store(v4)  # the upgrade re-reads and rehashes every row, the late one too
    traj = store.read("trajectories")
    assert traj.height == 47 and traj.filter(traj_id="late")["params_hash"].to_list() == [NEW]
    assert OLD4 not in set(traj["params_hash"])


def test_several_processes_opening_one_v4_store_all_succeed(v4, tmp_path):
    alone = tmp_path / "alone"
    shutil.copytree(v4, alone)
    want = {n: _sorted(open_store(alone).read(n), ts.key) for n, ts in schemas.TABLES.items()}
    code = "import sys; from rldata import open_store; open_store(sys.argv[1]); print('ok')"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(v4)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    results = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err[-300:] for _, err in results]
    store = open_store(v4)
    assert all(table_version(store.table(n)) == ts.version for n, ts in schemas.TABLES.items())
    for name, ts in schemas.TABLES.items():
        assert _sorted(store.read(name), ts.key) == want[name], name


def test_passrates_waits_for_damaged_trajectories(v4):
    # the new hashes come from the trajectories: with their log damaged, passrates is not upgraded
    # (nor written to) and says why; the first open after the repair upgrades both
    commit = v4 / "trajectories" / "_delta_log" / f"{1:020d}.json"
    saved = commit.read_bytes()
    commit.write_bytes(b"")
    store = open_store(v4)
    assert set(store.damaged) == {"trajectories", "passrates"}
    assert "trajectories is damaged" in store.damaged["passrates"]
    assert table_version(DeltaTable(str(v4 / "passrates"))) == 4
    commit.write_bytes(saved)
    store = open_store(v4)
    assert not store.damaged and store.count("passrates") == 6
    assert table_version(store.table("passrates")) == schemas.get("passrates").version
