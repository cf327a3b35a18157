"""TrainConfig: defaults, derived sizes, YAML loading, and errors that name file and field."""

from __future__ import annotations

import pytest

from rldata.errors import InputError
from rldata.trainer.config import ConfigError, TrainConfig


def test_defaults_and_derived_sizes():
    cfg = TrainConfig(prompts_per_step=8, n=4, num_learners=2, micro_batch=4)
    assert cfg.batch_size == 32
    assert cfg.per_learner_batch == 16
    assert cfg.grad_accum_steps == 4
    spec = cfg.rollout  # the rollouts' sampling is a SamplingSpec itself: n = G
    assert (spec.n, spec.temperature, spec.max_tokens, spec.seed) == (4, 1.0, 16, 0)
    assert (cfg.eval_spec().n, cfg.eval_spec().temperature) == (16, 1.0)


def test_the_eval_follows_the_rollout_except_its_own_n_and_temperature():
    """docs/trainer.md: an eval sampling field left at its default is the rollout's; n (16) and
    temperature (1.0) are the eval's own; a field set to something else is the eval's."""
    cfg = TrainConfig(n=4, max_tokens=40, seed=3, temperature=0.7)
    ev = cfg.eval_spec()
    assert (ev.n, ev.temperature, ev.max_tokens, ev.seed) == (16, 1.0, 40, 3)
    own = TrainConfig.from_dict(
        {"max_tokens": 40, "eval": {"n": 2, "max_tokens": 8, "top_p": 0.5, "temperature": 0}}
    )
    ev = own.eval_spec()
    assert (ev.n, ev.temperature, ev.max_tokens, ev.top_p, ev.seed) == (2, 0.0, 8, 0.5, 0)
    # the eval may sample off-policy (a nucleus, greedy): the on-policy rule is the rollout's only
    with pytest.raises(ConfigError, match="top_p: must be 1.0 for training"):
        TrainConfig(top_p=0.5)


def test_the_default_micro_batch_fits_a_learners_share():
    """issue 45: the default micro-batch (16) is capped at a learner's share instead of refusing it;
    a micro-batch that does not divide the share says what to set."""
    small = TrainConfig(prompts_per_step=2, n=4)  # 8 sequences
    assert (small.micro_batch, small.micro_batch_rows, small.grad_accum_steps) == (None, 8, 1)
    assert TrainConfig(prompts_per_step=8, n=8).micro_batch_rows == 16
    with pytest.raises(ConfigError) as e:
        TrainConfig(prompts_per_step=3, n=8, micro_batch=16)
    assert e.value.field == "micro_batch"
    assert "set micro_batch to a divisor of 24 (12, 8, 6), or leave it unset (rule: train_rules)" in str(
        e.value
    )


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"n": 1}, "n"),
        ({"steps": 0}, "steps"),
        ({"lr": 0.0}, "lr"),
        ({"eps_low": 1.0}, "eps_low"),
        ({"eps_high": -0.1}, "eps_high"),
        ({"kl_coef": -1.0}, "kl_coef"),
        ({"agg": "batch"}, "agg"),
        ({"advantage": "ppo"}, "advantage"),
        ({"temperature": 0.0}, "temperature"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_p": 0.9}, "top_p"),
        ({"behav_weight_cap": 0.5}, "behav_weight_cap"),
        ({"mode": "overlap"}, "mode"),
        ({"mode": "async", "max_staleness": 0}, "max_staleness"),
        ({"learner_threads": -1}, "learner_threads"),
        ({"adam_betas": (0.9,)}, "adam_betas"),
        ({"steps": "ten"}, "steps"),
        ({"steps": True}, "steps"),
        ({"dynamic_sampling": "yes"}, "dynamic_sampling"),
        # 4 * 3 = 12 sequences do not split over 5 learners
        ({"prompts_per_step": 4, "n": 3, "num_learners": 5}, "num_learners"),
        # 12 / 2 = 6 per learner do not split into micro-batches of 4
        ({"prompts_per_step": 4, "n": 3, "num_learners": 2, "micro_batch": 4}, "micro_batch"),
        ({"top_k": 5}, "top_k"),
    ],
)
def test_invalid_values_name_the_field(changes, field):
    base = {"prompts_per_step": 4, "n": 4, "micro_batch": 4}
    with pytest.raises(ConfigError) as e:
        TrainConfig(**{**base, **changes})
    assert e.value.field == field


def test_ints_accepted_for_floats_and_none_for_optionals():
    cfg = TrainConfig(lr=1, kl_coef=0, model=None, micro_batch=8)
    assert cfg.lr == 1 and cfg.engine.model is None


def test_from_yaml_with_overrides(tmp_path):
    p = tmp_path / "train.yaml"
    p.write_text(
        "steps: 7\nlr: 2.0e-4\nn: 4\nprompts_per_step: 4\nmicro_batch: 8\n"
        "agg: sequence\nadam_betas: [0.9, 0.95]\ncurriculum: buckets.yaml\n"
    )
    cfg = TrainConfig.from_yaml(p, steps=3, seed=None)  # None = option not given
    assert (cfg.steps, cfg.lr, cfg.agg, cfg.adam_betas, cfg.curriculum) == (
        3,
        2e-4,
        "sequence",
        (0.9, 0.95),
        "buckets.yaml",
    )
    assert cfg.rollout.seed == 0
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg


def test_from_yaml_errors_name_file_and_field(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("steps: 5\nlearning_rate: 0.1\n")
    with pytest.raises(InputError) as e:
        TrainConfig.from_yaml(p)
    assert e.value.field == "learning_rate" and str(p) in str(e.value) and "unknown field" in str(e.value)

    p.write_text("n: 1\n")
    with pytest.raises(InputError) as e:
        TrainConfig.from_yaml(p)
    assert e.value.field == "n"

    p.write_text("steps: [1,\n")
    with pytest.raises(InputError, match="not valid YAML"):
        TrainConfig.from_yaml(p)

    p.write_text("- 1\n- 2\n")
    with pytest.raises(InputError, match="mapping"):
        TrainConfig.from_yaml(p)

    with pytest.raises(InputError, match="cannot read"):
        TrainConfig.from_yaml(tmp_path / "missing.yaml")


def test_top_p_below_one_is_refused_with_the_reason():
    with pytest.raises(ConfigError, match="top_p: must be 1.0 for training.*nucleus"):
        TrainConfig(top_p=0.95)


def test_staleness_bound_is_zero_in_sync_mode():
    assert TrainConfig(max_staleness=3).staleness_bound == 0
    assert TrainConfig(mode="async", max_staleness=3).staleness_bound == 3
