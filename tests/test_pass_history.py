"""rldata.pass_history.run_info reads a run's live settings as the run used them."""

from __future__ import annotations

import pytest

from rldata.pass_history import run_info
from rldata.runs import record_run


@pytest.mark.parametrize(
    "live, age",
    [
        ({"decay": 0.8, "age": "drawn"}, "drawn"),  # stored by this release: the whole LiveConfig
        ({"decay": 0.8, "age": "version"}, "version"),
        ({"decay": 0.8}, "version"),  # stored before `age` existed: those runs aged by version
        (None, "version"),  # stored before live samplers existed
    ],
)
def test_run_info_reads_the_age_the_run_used(store, live, age):
    config = {"steps": 2} if live is None else {"steps": 2, "live": live}
    with record_run(store, "train", {"config": config}, run_id="r1"):
        pass
    info = run_info(store, "r1")
    assert info.live.age == age
    assert info.live.decay == (0.8 if live else 0.9)


def test_a_train_config_stores_its_age():
    # what record_run stores for a training run is the whole config, `live.age` included
    from rldata.trainer.config import TrainConfig

    assert TrainConfig().to_dict()["live"]["age"] == "drawn"
