"""Names that become paths or ids (run ids, tags): one safe rule, refused with one line naming the field."""

from __future__ import annotations

import pytest

from rldata import open_store
from rldata.errors import ConfigError, RldataError
from rldata.interop import ImportConfig
from rldata.names import check_name
from rldata.runs.core import record_run
from rldata.trainer.config import TrainConfig, TrainRun

GOOD = ["r1", "train-20260101-120000-abc123", "import:jsonl:0123abcd", "seed_0.lr-3e-4", "_x", "a" * 128]
BAD = [
    "",
    "../../escape",
    "a/b",
    "a\\b",
    "..",
    ".hidden",
    "-rf",
    ":x",
    "x\ny",
    "a\x07b",
    "tab\there",
    "sp ace",
    "é",
    "a" * 129,
    None,
    5,
]


@pytest.mark.parametrize("name", GOOD)
def test_safe_names_pass(name):
    assert check_name(name, field="run_id") == name


@pytest.mark.parametrize("name", BAD)
def test_unsafe_names_are_one_line_config_errors(name):
    with pytest.raises(ConfigError) as e:
        check_name(name, field="run_id")
    assert e.value.field == "run_id" and "\n" not in str(e.value)


@pytest.mark.parametrize("name", ["../../escape", "a/b\x07c"])
def test_train_run_id_and_tag_are_checked_before_anything_starts(name):
    with pytest.raises(RldataError, match="run_id"):
        TrainConfig(run_id=name)
    with pytest.raises(RldataError, match="tag"):
        TrainRun(tag=name)


def test_record_run_and_import_refuse_an_unsafe_run_id(tmp_path):
    store = open_store(tmp_path / "store")
    before = store.count("runs")
    with pytest.raises(ConfigError, match="run_id"), record_run(store, "x", {}, run_id="../up"):
        pass
    assert store.count("runs") == before
    with pytest.raises(ConfigError, match="run_id"):
        ImportConfig(format="jsonl", run_id="a/b")
