"""Issue 44 §2, the last silent inputs: control characters in prompts and answers, JSON objects with a
duplicate key, a curriculum whose selection the store lacks, and outputs that cannot be written (a
closed pipe, a full device).  Each hostile case: one clear line, a non-zero exit, no traceback, and
the store unchanged (or exactly the intended change)."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys

import polars as pl
import pytest

from rldata import open_store
from rldata.errors import InputError
from tests.reliability.helpers import banded_store, fingerprint, one_error_line, run

RULE = "C0 control characters other than tab, newline and CR-LF are refused (docs/ingest.md)"


@pytest.fixture
def root(tmp_path):
    return banded_store(tmp_path / "store")


def _refused(capsys, root, *argv) -> str:
    before = fingerprint(root)
    code, out, err = run(capsys, "--store", root, *argv)
    line = one_error_line(err)
    assert code == 1 and out == "", err
    assert fingerprint(root) == before
    return line


def _tasks(root) -> list[tuple]:
    return open_store(root).sql("SELECT prompt, answer FROM tasks ORDER BY prompt").fetchall()


# ---- control characters ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("record", "field", "code"),
    [
        ({"prompt": "2+2\u0000?", "answer": "4"}, "prompt", "U+0000"),
        ({"prompt": "2+2?", "answer": "4\u0007"}, "answer", "U+0007"),
        ({"prompt": "ok\rhidden", "answer": "4"}, "prompt", "U+000D"),  # a lone CR rewrites the line
        ({"prompt": "end\r", "answer": "4"}, "prompt", "U+000D"),
        ({"question": "x\u001b[2Jy", "answer": "4"}, "question", "U+001B"),  # the source column's name
        (
            {"prompt": "p", "messages": [{"role": "system", "content": "\u0008"}], "answer": "4"},
            "messages",
            "U+0008",
        ),
    ],
)
def test_a_control_character_is_refused_with_file_line_and_field(root, tmp_path, capsys, record, field, code):
    bad = tmp_path / "bad.jsonl"
    first = {"question" if "question" in record else "prompt": "fine?", "answer": "1"}
    bad.write_text(json.dumps(first) + "\n" + json.dumps(record) + "\n")
    mapping = ["--prompt-field", "question"] if "question" in record else []
    line = _refused(capsys, root, "ingest", str(bad), *mapping)
    assert f"{bad}:2: field '{field}': control character {code}: {RULE}" in line, line


def test_tab_newline_and_crlf_are_text_and_skip_keeps_the_rest(root, tmp_path, capsys):
    good = {"prompt": "col\tcol\r\nnext line\nlast", "answer": "a\tb"}
    bad = tmp_path / "mixed.jsonl"
    bad.write_text(json.dumps(good) + "\n" + json.dumps({"prompt": "z\u0000", "answer": "1"}) + "\n")
    before = set(_tasks(root))
    code, _, err = run(capsys, "--store", root, "ingest", str(bad), "--on-error", "skip")
    assert code == 0 and f"{bad}:2: field 'prompt': control character U+0000" in err, err
    assert set(_tasks(root)) - before == {(good["prompt"], "a\tb")}  # kept exactly as written


def test_csv_and_parquet_inputs_follow_the_same_rule(root, tmp_path, capsys):
    csv = tmp_path / "bad.csv"
    csv.write_bytes(b'prompt,answer\n"ok?",1\n"a\x01b",2\n')
    assert f"{csv}:3: field 'prompt': control character U+0001" in _refused(capsys, root, "ingest", str(csv))
    pq = tmp_path / "bad.parquet"
    pl.DataFrame({"prompt": ["fine?", "x"], "answer": ["1", "2\x00"]}).write_parquet(pq)
    assert f"{pq}:row 1: field 'answer': control character U+0000" in _refused(
        capsys, root, "ingest", str(pq)
    )


def test_imported_prompts_and_answers_follow_the_same_rule(root, tmp_path, capsys):
    dump = tmp_path / "dump"
    dump.mkdir()
    rows = [
        {"input": "1+1=", "output": "2", "gts": "2", "score": 1.0},
        {"input": "2+2=\u0000", "output": "4", "gts": "4", "score": 1.0},
        {"input": "3+3=", "output": "6\u0000 is kept", "gts": "6\u0007", "score": 1.0},
    ]
    (dump / "1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["import-rollouts", str(dump), "--format", "verl", "--model", "m"]
    line = _refused(capsys, root, *argv)
    assert f"1.jsonl:2: field 'input': control character U+0000: {RULE}" in line, line
    code, _, err = run(capsys, "--store", root, *argv, "--on-error", "skip")
    assert code == 0 and "1.jsonl:3: field 'gts': control character U+0007" in err, err
    assert open_store(root).count("trajectories") == 1  # only the clean record


# ---- duplicate keys ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('{"prompt": "p?", "answer": "1", "answer": "2"}', "answer"),
        ('{"prompt": "p?", "answer": "1", "meta": {"a": 1, "a": 2}}', "a"),
    ],
)
def test_a_duplicate_key_is_refused_with_file_line_and_key(root, tmp_path, capsys, text, key):
    bad = tmp_path / "dup.jsonl"
    bad.write_text('{"prompt": "ok?", "answer": "1"}\n' + text + "\n")
    line = _refused(capsys, root, "ingest", str(bad))
    assert f"{bad}:2: field '{key}': duplicate key '{key}' in a JSON object" in line, line


def test_every_reader_of_user_json_refuses_a_duplicate_key(root, tmp_path, capsys):
    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "1.jsonl").write_text('{"input": "1+1=", "output": "2", "gts": "2", "score": 1, "score": 0}\n')
    line = _refused(capsys, root, "import-rollouts", str(dump), "--format", "verl", "--model", "m")
    assert "1.jsonl:1: field 'score': duplicate key 'score'" in line
    # the eval set of --decontaminate: a line it cannot read would leave its prompt unchecked
    evals = tmp_path / "eval.jsonl"
    evals.write_text('{"prompt": "a b c"}\n{"prompt": "d e f", "prompt": "g h i"}\n')
    new = tmp_path / "new.jsonl"
    new.write_text('{"prompt": "new?", "answer": "1"}\n')
    line = _refused(capsys, root, "ingest", str(new), "--decontaminate", str(evals))
    assert f"{evals}:2: field 'prompt': duplicate key 'prompt'" in line
    # a --config JSON object, and YAML files (a sample config, a curriculum)
    line = _refused(capsys, root, "ingest", "--gym", "basic_arithmetic", "--config", '{"a": 1, "a": 2}')
    assert "--config: not valid JSON: duplicate key 'a'" in line
    line = _refused(capsys, root, "env", "register", "x", "--verifiers", "m", "--config", '{"a": 1, "a": 2}')
    assert "--config: env_config: not valid JSON: duplicate key 'a'" in line
    conf = tmp_path / "sample.yaml"
    conf.write_text("n: 4\nmax_tokens: 8\nn: 8\n")
    assert "line 3" in _refused(capsys, root, "sample", "--config", str(conf))
    cur = tmp_path / "cur.yaml"
    cur.write_text("selection: s1\nbuckets: [easy]\nbuckets: [hard]\n")
    assert "duplicate key 'buckets'" in _refused(capsys, root, "curriculum", str(cur))
    # a labelled set (rldata.verify.agreement)
    from rldata.verify.agreement import load_labelled

    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text('{"gold": "1", "completion": "1", "label": true, "label": false}\n')
    with pytest.raises(InputError, match="labelled.jsonl:1: field 'label': duplicate key 'label'"):
        load_labelled(labelled)


# ---- a curriculum's selection is checked against the store -------------------------------------
def test_curriculum_checks_its_selection_when_a_store_is_given(root, tmp_path, capsys, monkeypatch):
    cur = tmp_path / "buckets.yaml"
    code, _, err = run(
        capsys, "--store", root, "stratify", "-s", "s1", "--quantiles", "2", "--curriculum", str(cur)
    )
    assert code == 0, err
    assert run(capsys, "--store", root, "curriculum", str(cur))[0] == 0
    other = tmp_path / "other.yaml"
    other.write_text(cur.read_text().replace("selection: s1", "selection: nope"))
    line = _refused(capsys, root, "curriculum", str(other))
    assert f"selection 'nope' (named in {other}) is not in the store" in line, line
    monkeypatch.setenv("RLDATA_STORE", root)  # the store given by the environment: checked too
    assert "selection 'nope'" in _refused(capsys, root, "curriculum", str(other))
    monkeypatch.delenv("RLDATA_STORE")
    monkeypatch.chdir(tmp_path)  # no store given: the file alone is checked
    assert run(capsys, "curriculum", str(other))[0] == 0
    one = tmp_path / "one.yaml"  # names one of the selection's two buckets: train would refuse it
    one.write_text(
        "version: 1\nselection: s1\nbuckets:\n- name: easy\nphases:\n- name: all\n  weights:\n    easy: 1.0\n"
    )
    assert "unknown bucket(s) ['hard']" in _refused(capsys, root, "curriculum", str(one))


# ---- outputs that cannot be written -------------------------------------------------------------
class _Refusing:
    """A stdout whose every write fails as a closed pipe or a full disk does."""

    def __init__(self, err: int):
        self.err = err

    def write(self, _):
        raise OSError(self.err, os.strerror(self.err))

    def flush(self):
        raise OSError(self.err, os.strerror(self.err))

    def isatty(self):
        return False


@pytest.mark.parametrize(
    ("err", "why"), [(errno.EPIPE, "the reader closed the pipe"), (errno.ENOSPC, "No space left")]
)
@pytest.mark.parametrize(
    "argv",
    [["tables", "-f", "csv"], ["sql", "SELECT 1 AS x", "-f", "json"], ["passrates"]],
    ids=lambda a: a[0],
)
def test_stdout_that_refuses_bytes_is_one_line_and_exit_1(root, capsys, monkeypatch, argv, err, why):
    before = fingerprint(root)
    monkeypatch.setattr(sys, "stdout", _Refusing(err))
    code, _, stderr = run(capsys, "--store", root, *argv)
    monkeypatch.undo()
    assert code == 1 and f"stdout: cannot write: {why}" in one_error_line(stderr)
    assert fingerprint(root) == before


def test_ingest_whose_summary_cannot_be_printed_says_what_it_committed(root, tmp_path, capsys, monkeypatch):
    new = tmp_path / "new.jsonl"
    new.write_text('{"prompt": "new?", "answer": "1"}\n')
    monkeypatch.setattr(sys, "stdout", _Refusing(errno.EPIPE))
    code, _, err = run(capsys, "--store", root, "ingest", str(new), "-f", "json")
    monkeypatch.undo()
    line = one_error_line(err)
    assert code == 1 and "stdout: cannot write: the reader closed the pipe" in line
    assert "the ingest committed 1 task(s) (tasks version 2): only this output is missing" in line
    assert open_store(root).count("tasks") == 13  # the commit stands; the error says so


def _cli(root, *argv, stdout) -> subprocess.CompletedProcess:
    env = {**os.environ, "RLDATA_STORE": str(root)}
    return subprocess.run(
        [sys.executable, "-m", "rldata", *argv],
        check=False,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        timeout=120,
    )


def test_a_closed_pipe_and_a_full_device_in_a_real_process(root, tmp_path):
    """The real file descriptors: a reader that went away (``rldata tables | head -0``) and /dev/full.
    One line each, exit 1, and no second 'Exception ignored' line from the interpreter's last flush."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = _cli(root, "sql", "SELECT * FROM range(100000)", "-f", "csv", stdout=w)
    finally:
        os.close(w)
    assert (
        p.returncode == 1 and p.stderr == "rldata: error: stdout: cannot write: the reader closed the pipe\n"
    )
    if os.path.exists("/dev/full") and stat.S_ISCHR(os.stat("/dev/full").st_mode):
        with open("/dev/full", "w") as full:
            new = tmp_path / "new.jsonl"
            new.write_text('{"prompt": "new?", "answer": "1"}\n')
            p = _cli(root, "ingest", str(new), "-f", "csv", stdout=full)
        assert p.returncode == 1, p.stderr
        assert p.stderr.count("\n") == 1 and "stdout: cannot write: No space left on device" in p.stderr
        assert "the ingest committed 1 task(s)" in p.stderr


def test_export_to_a_device_or_a_full_disk_is_one_line(root, tmp_path, capsys):
    if os.path.exists("/dev/full"):  # a device at --out is never replaced by the export's directory
        line = _refused(
            capsys, root, "export", "--selection", "s1", "--format", "jsonl", "--out", "/dev/full"
        )
        assert "--out: out /dev/full: not a directory" in line
        assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = (
        os.geteuid() == 0
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], check=False, capture_output=True
        ).returncode
        == 0
    )
    if not mounted:
        pytest.skip("needs root and tmpfs mounts to make a full disk")
    try:
        free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
        (disk / "fill").write_bytes(b"\0" * (free - 4096))
        for fmt in ("jsonl", "verl", "hf"):
            out = disk / f"out-{fmt}"
            line = _refused(capsys, root, "export", "--selection", "s1", "--format", fmt, "--out", str(out))
            assert f"--out: out {out}: cannot write: No space left on device" in line, line
            assert sorted(p.name for p in disk.iterdir()) == ["fill"]  # nothing half-written left
    finally:
        subprocess.run(["umount", "--lazy", str(disk)], check=True)  # lazy: a failed check leaves no mount
