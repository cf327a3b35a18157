"""Reward composition: per-domain z-scores before mixing, alpha, length penalty, YAML specs."""

from __future__ import annotations

import math
import os

import polars as pl
import pytest

import rldata
from rldata.errors import RldataError
from rldata.rewards.compose import (
    DomainReward,
    LengthPenalty,
    RewardSpec,
    compose_rewards,
    load_reward_spec,
    reward_metrics,
)


def _z(xs):
    m = sum(xs) / len(xs)
    s = math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))
    return [(x - m) / (s + 1e-6) for x in xs]


def test_plain_verifiable_reward_passes_through():
    out = compose_rewards({"domain": ["math"] * 3, "r_vr": [1.0, 0.0, 1.0]}, RewardSpec())
    assert out["total"].to_list() == [1.0, 0.0, 1.0]
    assert out["r_vr_norm"].to_list() == [1.0, 0.0, 1.0]
    assert out["length_penalty"].to_list() == [0.0, 0.0, 0.0]


def test_zscore_is_per_domain_and_before_mixing():
    spec = RewardSpec(
        domains={
            "math": DomainReward(alpha=0.5, normalize=True),
            "code": DomainReward(alpha=1.0, normalize=True),
        }
    )
    batch = {
        "domain": ["math", "code", "math", "code", "math", "code"],
        "r_vr": [1.0, 0.2, 0.0, 0.4, 1.0, 0.9],
        "r_genrm": [0.0, None, 1.0, None, 1.0, None],
    }
    out = compose_rewards(batch, spec)
    math_rows = out.filter(pl.col("domain") == "math")
    code_rows = out.filter(pl.col("domain") == "code")
    assert math_rows["r_vr_norm"].to_list() == pytest.approx(_z([1.0, 0.0, 1.0]))
    assert math_rows["r_genrm_norm"].to_list() == pytest.approx(_z([0.0, 1.0, 1.0]))
    assert code_rows["r_vr_norm"].to_list() == pytest.approx(_z([0.2, 0.4, 0.9]))
    # mixing uses the normalized components
    want = [0.5 * v + 0.5 * g for v, g in zip(_z([1.0, 0.0, 1.0]), _z([0.0, 1.0, 1.0]))]
    assert math_rows["total"].to_list() == pytest.approx(want)
    assert code_rows["total"].to_list() == pytest.approx(_z([0.2, 0.4, 0.9]))
    assert out["domain"].to_list() == batch["domain"]  # row order kept


def test_zscore_of_one_domain_ignores_the_others():
    spec = RewardSpec(default=DomainReward(normalize=True))
    alone = compose_rewards({"domain": ["a", "a"], "r_vr": [0.0, 1.0]}, spec)
    mixed = compose_rewards({"domain": ["a", "b", "a", "b"], "r_vr": [0.0, 100.0, 1.0, -5.0]}, spec)
    assert mixed.filter(pl.col("domain") == "a")["total"].to_list() == pytest.approx(alone["total"].to_list())


def test_constant_domain_normalizes_to_zero():
    out = compose_rewards(
        {"domain": ["a"] * 3, "r_vr": [1.0] * 3}, RewardSpec(default=DomainReward(normalize=True))
    )
    assert out["r_vr_norm"].to_list() == [0.0, 0.0, 0.0]


def test_overlong_and_linear_length_penalties():
    lp = LengthPenalty(kind="overlong", max_tokens=100, buffer=20, coef=0.5)
    spec = RewardSpec(default=DomainReward(length_penalty=lp))
    out = compose_rewards({"domain": ["m"] * 4, "r_vr": [1.0] * 4, "length": [50, 80, 90, 150]}, spec)
    assert out["length_penalty"].to_list() == pytest.approx([0.0, 0.0, 0.25, 0.5])
    assert out["total"].to_list() == pytest.approx([1.0, 1.0, 0.75, 0.5])
    lin = RewardSpec(
        default=DomainReward(length_penalty=LengthPenalty(kind="linear", max_tokens=200, coef=0.2, buffer=10))
    )
    out = compose_rewards({"domain": ["m"], "r_vr": [0.0], "length": [100]}, lin)
    assert out["total"].to_list() == pytest.approx([-0.1])


def test_errors_count_as_wrong_before_mixing():
    spec = RewardSpec(default=DomainReward(alpha=0.25))
    out = compose_rewards(
        {"domain": ["m"] * 3, "r_vr": [1.0, None, None], "r_genrm": [None, 1.0, None]}, spec
    )
    assert out["total"].to_list() == pytest.approx([0.25, 0.75, 0.0])  # an error is a 0 of its component
    assert out["vr_error"].to_list() == [False, True, True]
    assert out["rm_error"].to_list() == [True, False, True]
    both = compose_rewards({"domain": ["m"], "r_vr": [1.0], "r_genrm": [0.0]}, spec)
    assert both["total"].to_list() == pytest.approx([0.25])


ERROR_SPECS = [
    RewardSpec(),
    RewardSpec(default=DomainReward(normalize=True)),
    RewardSpec(default=DomainReward(normalize=True, length_penalty=LengthPenalty("overlong", 16, 8, 0.5))),
    RewardSpec(default=DomainReward(length_penalty=LengthPenalty("linear", 16, 8, 0.5))),
]


@pytest.mark.parametrize("spec", ERROR_SPECS)
def test_an_error_never_scores_above_a_wrong_answer(spec):
    # issue 12: pass/pass/error/fail under normalize gave 0.71/0.71/0/-1.41 (the error at the mean)
    out = compose_rewards(
        {"domain": ["m"] * 4, "r_vr": [1.0, 1.0, None, 0.0], "length": [4, 4, 14, 14]}, spec
    )
    total = out["total"].to_list()
    assert total[2] <= total[3] < total[0]
    assert total[2] == pytest.approx(total[3])  # same length: the error is exactly a wrong answer
    assert out["length_penalty"][2] == out["length_penalty"][3]  # the penalty applies to errors too
    m = reward_metrics(out)
    assert m["reward/n_error/m"] == 1.0 and m["reward/n_judge_error/m"] == 0.0


def test_a_judge_error_never_scores_above_a_wrong_judged_answer():
    spec = RewardSpec(default=DomainReward(alpha=0.5, normalize=True))
    out = compose_rewards(
        {"domain": ["m"] * 4, "r_vr": [0.0, 0.0, 0.0, 1.0], "r_genrm": [0.0, None, 1.0, 1.0]}, spec
    )
    total = out["total"].to_list()
    assert total[1] == pytest.approx(total[0]) and total[1] < total[2] < total[3]


def test_alpha_below_one_needs_judge_scores():
    with pytest.raises(RldataError, match="needs r_genrm"):
        compose_rewards({"domain": ["m"], "r_vr": [1.0]}, RewardSpec(default=DomainReward(alpha=0.5)))
    with pytest.raises(RldataError, match="'domain' and 'r_vr'"):
        compose_rewards({"r_vr": [1.0]}, RewardSpec())


def test_yaml_spec_round_trip(tmp_path):
    path = tmp_path / "rewards.yaml"
    path.write_text(
        "default: {alpha: 1.0}\n"
        "domains:\n"
        "  math: {alpha: 0.7, normalize: true,\n"
        "         length_penalty: {kind: overlong, max_tokens: 512, buffer: 128, coef: 1.0}}\n"
    )
    spec = load_reward_spec(path)
    assert spec.for_domain("math") == DomainReward(
        alpha=0.7, normalize=True, length_penalty=LengthPenalty("overlong", 512, 128, 1.0)
    )
    assert spec.for_domain("code") == DomainReward()


@pytest.mark.parametrize(
    "text, msg",
    [
        ("domains:\n  math: {alpha: 2}\n", r"domains\.math: alpha must be in \[0, 1\]"),
        ("domains:\n  math: {beta: 1}\n", r"domains\.math: .*beta"),
        ("domain: {}\n", "unknown key"),
        ("domains:\n  math: {length_penalty: {kind: cubic}}\n", "kind must be one of"),
        ("- a\n- b\n", "a reward spec is a mapping"),
        ("default: [unclosed\n", "cannot read reward spec"),
    ],
)
def test_bad_yaml_spec_names_file_and_key(tmp_path, text, msg):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(RldataError, match=msg) as e:
        load_reward_spec(path)
    assert str(path) in str(e.value)


def test_metrics_log_every_component_per_domain():
    spec = RewardSpec(default=DomainReward(alpha=0.5))
    out = compose_rewards(
        {"domain": ["a", "a", "b"], "r_vr": [1.0, 0.0, 1.0], "r_genrm": [1.0, 1.0, 0.0], "length": [1, 2, 3]},
        spec,
    )
    m = reward_metrics(out)
    assert m["reward/r_vr/a"] == 0.5 and m["reward/r_genrm/a"] == 1.0
    assert m["reward/total/a"] == pytest.approx(0.75) and m["reward/total/b"] == pytest.approx(0.5)
    assert m["reward/n/a"] == 2.0 and m["reward/n_error/b"] == 0.0
    assert m["reward/total"] == pytest.approx((1.0 + 0.5 + 0.5) / 3)
    assert {"reward/length_penalty/a", "reward/r_vr_norm/b", "reward/r_genrm_norm/b"} <= set(m)


def test_config_checks():
    with pytest.raises(ValueError, match="alpha"):
        DomainReward(alpha=-0.1)
    with pytest.raises(ValueError, match="buffer"):
        LengthPenalty(kind="overlong", max_tokens=10, buffer=20)


def _seed_run(store):
    store.append(
        "tasks",
        [
            {"task_id": "m1", "source": "s", "domain": "math", "prompt": "2+3=", "answer": "5"},
            {"task_id": "c1", "source": "s", "domain": "code", "prompt": "write add"},
        ],
    )
    store.append(
        "trajectories",
        [
            {
                "traj_id": tid,
                "task_id": task,
                "run_id": "r1",
                "sample_idx": i,
                "model": "m",
                "policy_version": 0,
                "params_hash": "p",
                "completion_tokens": length,
            }
            for tid, task, i, length in [
                ("m1/0", "m1", 0, 4),
                ("m1/1", "m1", 1, 8),
                ("c1/0", "c1", 0, 30),
                ("c1/1", "c1", 1, 50),
                ("c1/2", "c1", 2, 10),
            ]
        ],
    )
    v = [
        ("m1/0", "m1", "math", "answer", True),
        ("m1/1", "m1", "math", "answer", False),
        # code: all three layers pass / the hidden layer fails / the sandbox errored
        *[("c1/0", "c1", "code", lay, True) for lay in ("rule", "public", "hidden")],
        ("c1/1", "c1", "code", "rule", True),
        ("c1/1", "c1", "code", "public", True),
        ("c1/1", "c1", "code", "hidden", False),
        ("c1/2", "c1", "code", "rule", True),
        ("c1/2", "c1", "code", "public", None),
        ("c1/2", "c1", "code", "hidden", None),
        # judge: a score for m1/0 and c1/2, an unparseable verdict for m1/1
        ("m1/0", "m1", "genrm", "judge", False),
        ("m1/1", "m1", "genrm", "judge", None),
        ("c1/2", "c1", "genrm", "judge", True),
    ]
    store.append(
        "verifications",
        [
            {
                "traj_id": t,
                "task_id": k,
                "verifier": ver,
                "verifier_version": "1",
                "layer": lay,
                "passed": p,
                "score": 1.0 if p else 0.0,
            }
            for t, k, ver, lay, p in v
        ],
    )


def test_rewards_for_a_stored_run(store):
    from rldata.rewards.compose import rewards_for_run

    _seed_run(store)
    spec = RewardSpec(domains={"code": DomainReward(alpha=0.5)})
    out = rewards_for_run(store, "r1", spec).sort("traj_id")
    assert out["traj_id"].to_list() == ["c1/0", "c1/1", "c1/2", "m1/0", "m1/1"]
    assert out["r_vr"].to_list() == [1.0, 0.0, 0.0, 1.0, 0.0]  # all layers must pass; an error scores 0
    assert out["vr_error"].to_list() == [False, False, True, False, False]
    assert out["r_genrm"].to_list() == [0.0, 0.0, 1.0, 0.0, 0.0]  # a judge error scores 0 too
    assert out["rm_error"].to_list() == [True, True, False, False, True]
    assert out["total"].to_list() == [0.5, 0.0, 0.5, 1.0, 0.0]
    assert out["length"].to_list() == [30, 50, 10, 4, 8]
    with pytest.raises(RldataError, match="no trajectories"):
        rewards_for_run(store, "nope", spec)


def test_rewards_cli_prints_and_logs_metrics(store, tmp_path, capsys):
    import json

    from rldata.cli import main

    _seed_run(store)
    spec = tmp_path / "r.yaml"
    spec.write_text("domains:\n  code: {alpha: 0.5}\n")
    code = main(
        [
            "--store",
            store.root,
            "rewards",
            "--run-id",
            "r1",
            "--spec",
            str(spec),
            "--write-metrics",
            "0",
            "-f",
            "json",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    got = {r["name"]: r["value"] for r in json.loads(out)}
    # code: 0.5, 0, 0.5 (the sandbox error scores as a fail, the judge error as a 0 judge score)
    assert got["reward/total/code"] == pytest.approx(1 / 3) and got["reward/total/math"] == pytest.approx(0.5)
    assert got["reward/n_error/code"] == 1.0 and got["reward/n_judge_error/code"] == 2.0
    stored = store.sql("SELECT name, value FROM metrics WHERE run_id = 'r1' AND step = 0").pl()
    assert dict(stored.iter_rows()) == pytest.approx(got)
    # the same composition and write from Python: the command is this verb
    res = rldata.rewards(store, run_id="r1", spec=spec, write_metrics=5)
    assert dict(res.metrics) == pytest.approx(got) and res.written == len(got) and res.rows.height > 0
    again = store.sql("SELECT name, value FROM metrics WHERE run_id = 'r1' AND step = 5").pl()
    assert dict(again.iter_rows()) == pytest.approx(got)
    assert rldata.rewards(store, run_id="r1", spec=spec).written == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("domains:\n  code: {alpha: 3}\n")
    assert main(["--store", store.root, "rewards", "--run-id", "r1", "--spec", str(bad)]) == 1
    assert "alpha must be in [0, 1]" in capsys.readouterr().err
    if os.path.exists("/dev/full"):  # the rows are written before the metrics commit (issue 29)
        before = store.version("metrics")
        argv = [
            "--store",
            store.root,
            "rewards",
            "--run-id",
            "r1",
            "--write-metrics",
            "1",
            "--out",
            "/dev/full",
        ]
        assert main(argv) == 1 and "cannot write" in capsys.readouterr().err
        assert store.version("metrics") == before


def test_length_penalty_is_checked_against_the_runs_max_tokens(tmp_path, capsys):
    # issue 12: LengthPenalty.max_tokens defaults to 1024 while a run's max_tokens is 16: never checked
    from rldata.configs.sampling import SampleConfig, SamplingSpec
    from rldata.jobs.sample import plan_sample
    from rldata.trainer.config import TrainConfig
    from rldata.trainer.rollout import load_reward

    path = tmp_path / "r.yaml"
    path.write_text("domains:\n  math: {length_penalty: {kind: overlong}}\n")
    spec = load_reward_spec(path)
    with pytest.raises(
        RldataError, match=r"domains\.math\.length_penalty\.max_tokens=1024 exceeds the run's max_tokens=16"
    ):
        spec.check_max_tokens(16, where=str(path))
    assert spec.check_max_tokens(1024) is spec and RewardSpec().check_max_tokens(1) == RewardSpec()
    with pytest.raises(RldataError, match=f"{path}: .*max_tokens=16"):
        load_reward(TrainConfig(reward_spec=str(path), max_tokens=16))
    with pytest.raises(RldataError, match="max_tokens=16"):  # before the sample job starts anything
        plan_sample(SampleConfig(sampling=SamplingSpec(max_tokens=16), reward_spec=spec))
    from rldata.cli import main

    assert (
        main(["--store", str(tmp_path / "s"), "sample", "--reward-spec", str(path), "--max-tokens", "16"])
        == 1
    )
    assert (
        "max_tokens=1024 exceeds the run's max_tokens=16" in capsys.readouterr().err
    )  # before any engine starts
    ok = tmp_path / "ok.yaml"
    ok.write_text("domains:\n  math: {length_penalty: {kind: overlong, max_tokens: 16, buffer: 4}}\n")
    assert (
        load_reward(TrainConfig(reward_spec=str(ok), max_tokens=16)).for_domain("math").length_penalty.buffer
        == 4
    )
