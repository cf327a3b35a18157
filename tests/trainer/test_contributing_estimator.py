"""docs/contributing.md, "Add an advantage estimator", followed step by step with a toy estimator."""

from __future__ import annotations

import numpy as np
import pytest

from rldata.trainer import advantages
from rldata.trainer.advantages import ESTIMATORS, compute_advantages, register
from rldata.trainer.config import ConfigError, TrainConfig


@pytest.fixture
def registry():
    """The recipe adds to the process-wide registry: give it back as it was."""
    before = dict(ESTIMATORS)
    yield ESTIMATORS
    ESTIMATORS.clear()
    ESTIMATORS.update(before)


def test_the_recipe_adds_an_estimator_the_trainer_uses(registry, tmp_path):
    # Before step 1 the name is unknown: the config refuses it, naming the field.
    with pytest.raises(ConfigError) as e:
        TrainConfig(advantage="leave_one_out")
    assert e.value.field == "advantage"

    # Step 1: a plain function from rewards [num_groups, G] to advantages of the same shape, taking
    # eps like every estimator, registered under the name the config uses.
    @register("leave_one_out")
    def leave_one_out(rewards, *, eps: float = 1e-6) -> np.ndarray:
        """r_i minus the mean of the group's other rewards (RLOO's baseline)."""
        del eps  # part of every estimator's signature; this one does not divide
        r = np.asarray(rewards, dtype=np.float64)  # [num_groups, G]
        g = r.shape[1]
        others = (r.sum(axis=1, keepdims=True) - r) / (g - 1)  # [num_groups, G]
        return r - others

    assert registry["leave_one_out"] is leave_one_out
    assert advantages.ESTIMATORS is registry  # the one registry the config and the rollouts read

    # Step 2: compute_advantages (what each rollout round calls with cfg.advantage) uses it.
    # Hand-computed: group [1, 0, 0, 1]: 1 - 1/3 = 2/3 and 0 - 2/3 = -2/3; group [3, 1, 2, 2]:
    # 3 - 5/3 = 4/3, 1 - 7/3 = -4/3, 2 - 2 = 0, 2 - 2 = 0.
    adv = compute_advantages([[1.0, 0.0, 0.0, 1.0], [3.0, 1.0, 2.0, 2.0]], estimator="leave_one_out")
    np.testing.assert_allclose(adv, [[2 / 3, -2 / 3, -2 / 3, 2 / 3], [4 / 3, -4 / 3, 0.0, 0.0]], atol=1e-12)

    # Step 3: the training config accepts the name, directly and from a config file.
    assert TrainConfig(advantage="leave_one_out").advantage == "leave_one_out"
    path = tmp_path / "train.yaml"
    path.write_text("advantage: leave_one_out\nn: 4\n")
    assert TrainConfig.from_yaml(path).advantage == "leave_one_out"
    # and it is a choice of --advantage in the help and docs/options.md: from the registry, no edit
    from rldata.cli.options_docs import docs_table
    from rldata.trainer.config import TrainCommand

    row = next(r for r in docs_table(TrainCommand).splitlines() if r.startswith("| `--advantage`"))
    assert "One of: grpo, drgrpo, leave_one_out." in row
