"""Progress of real commands (rldata.console): stages and a final line on stderr, nothing of it on
stdout, silence under --quiet; on a terminal (a real pseudo-terminal) and in a log."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from rldata import open_store
from rldata.cli import main
from tests.term_helpers import run_in_terminal

RLDATA = str(Path(sys.executable).parent / "rldata")


def _store(tmp_path):
    st = open_store(tmp_path / "s")
    st.append("tasks", [{"task_id": "t", "source": "u", "domain": "math", "prompt": "1+1=", "answer": "2"}])
    return st


def test_doctor_shows_a_check_per_table_and_a_final_line_in_a_log(tmp_path, capsys):
    st = _store(tmp_path)
    assert main(["--store", st.root, "doctor", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == []  # stdout: the findings, nothing else
    final = [x for x in err.splitlines() if x.startswith("doctor: ") and " checks in " in x]
    assert len(final) == 1, err
    assert main(["--store", st.root, "--quiet", "doctor", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == [] and err == ""
    # --quiet lasts one command
    assert main(["--store", st.root, "doctor"]) == 0 and "checks in" in capsys.readouterr().err


def test_doctor_on_a_terminal_draws_a_bar_and_leaves_one_line(tmp_path):
    st = _store(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "RLDATA_QUIET"}
    out, term, code = run_in_terminal([RLDATA, "--store", st.root, "doctor", "--format", "csv"], env=env)
    assert code == 0 and out.startswith("check,table,count,detail,repaired")
    assert "doctor: " in term and " checks in " in term and "\x1b[" in term
    out, term, code = run_in_terminal([RLDATA, "--store", st.root, "--quiet", "doctor", "-f", "csv"], env=env)
    assert code == 0 and out.startswith("check,") and term.strip() == ""


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.ray
@pytest.mark.fresh_engines(reason="an engine start is the stage under test: a warm pool would skip it")
def test_sample_names_its_stages_and_ends_with_a_final_line(tmp_path, ray_session, capsys):
    """One run (an engine start is the stage under test; --quiet is the doctor tests' subject)."""
    from tests.jobs.test_sample import _arith_tasks

    st = open_store(tmp_path / "s")
    st.append("tasks", _arith_tasks(6, seed=5))
    args = ["sample", "--n", "2", "--max-tokens", "6", "--engines", "1", "--format", "json"]
    assert main(["--store", st.root, *args]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)[0]["tasks_sampled"] == 6  # stdout: the summary alone
    assert "loading the bundled model on 1 engine ..." in err
    assert "sampling: 6/6 tasks in " in err and "updating the pass-rate ledger of 6 tasks ..." in err
    assert err.rstrip().splitlines()[-1].startswith("sampled 6 tasks, 12 samples")
