"""The CLI puts the option that set a field in front of a library error naming that field
(``--band: band must be ...``), on a real store through ``rldata.cli.main``; exit codes unchanged."""

from __future__ import annotations

import pytest
import typer

from rldata import open_store
from rldata.cli import _load, app, main
from rldata.cli._common import flag_for


@pytest.fixture
def root(tmp_path):
    store = open_store(tmp_path / "store")
    store.append("tasks", [{"task_id": "t0", "source": "s", "domain": "math", "prompt": "q"}])
    return str(tmp_path / "store")


def _error(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("rldata: error: ") and out == "", err
    return code, lines[0].removeprefix("rldata: error: ")


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["filter", "--band", "abc", "--name", "s"], "--band: band must be LO,HI"),
        (["filter", "--band", "0.9,0.1", "--name", "s"], "--band: band low 0.9 is above high 0.1"),
        (["stratify", "-s", "s1"], "--buckets: give exactly one of buckets and quantiles"),
        (["stratify", "-s", "s1", "--buckets", "nonsense"], "--buckets: buckets item 1 'nonsense'"),
        (["sample", "--where", "1=1", "--selection", "s1"], "--selection: give where or selection, not both"),
        (["train", "--learners", "0"], "--learners: num_learners: must be >= 1, got 0"),
        (["train", "--steps", "0"], "--steps: steps: must be >= 1, got 0"),
        (["train", "--async", "--max-staleness", "0"], "--max-staleness: max_staleness: must be >= 1"),
    ],
)
def test_the_flag_is_put_in_front(root, capsys, args, line):
    code, got = _error(capsys, "--store", root, *args)
    assert code == 1 and got.startswith(line), got


def test_a_global_option_is_named_too(tmp_path, capsys):
    code, got = _error(capsys, "--store", str(tmp_path / "missing"), "tables")
    assert code == 1 and got.startswith(f"--store: no store at {tmp_path / 'missing'}"), got
    code, got = _error(capsys, "--store", str(tmp_path / "missing"), "--storage-option", "nokey", "tables")
    assert code == 1 and got.startswith("--storage-option: storage_options expects KEY=VALUE"), got


def test_a_file_field_gets_no_flag(root, tmp_path, capsys):
    cfg = tmp_path / "train.yaml"
    cfg.write_text("n: 1\n")
    code, got = _error(capsys, "--store", root, "train", "--config", str(cfg))
    assert code == 1 and got.startswith(f"{cfg}: field 'n'") and "--" not in got, got


def test_flag_for_only_names_options_the_command_has():
    _load()
    cli = typer.main.get_command(app)
    assert flag_for(cli, ["--store", "s", "stratify", "-s", "x"], "quantiles") == "--quantiles"
    assert flag_for(cli, ["--store", "s", "filter", "--name", "x"], "quantiles") is None
    assert flag_for(cli, ["train"], "num_learners") == "--learners"  # the override table
    assert flag_for(cli, ["train"], "adam_betas") is None  # a config field with no option: no flag
    assert flag_for(cli, ["sample"], "n") == "--n"
    assert flag_for(cli, ["sample"], None) is None


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("lora: {r: 4, alpha: 8}\nkl_coef: 0.1\n", ("lora", "kl_coef")),
        ("cpu_offload: true\n", ("cpu_offload", "strategy", "(rule: train_rules)")),
    ],
)
def test_a_bad_sharding_combination_is_one_line_and_the_store_is_unchanged(
    root, tmp_path, capsys, text, names
):
    """Issue 26's refused combinations, from a config file through `rldata train`: one line naming
    the fields, exit 1, and no table of the store gets a new version (no run row, no samples)."""
    cfg = tmp_path / "train.yaml"
    cfg.write_text(text)
    before = open_store(root).versions()
    code, got = _error(capsys, "--store", root, "train", "--config", str(cfg), "--run-id", "bad")
    assert code == 1 and all(n in got for n in names), got
    assert open_store(root).versions() == before
