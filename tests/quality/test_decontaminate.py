"""``rldata decontaminate`` through the CLI on a real store: eval packs stored as versioned data, one
row per match with its detector, score and span, flag and drop, reruns that change nothing, and bad
eval files refused in one line with the store unchanged."""

from __future__ import annotations

import json

import polars as pl
import pytest

from rldata import open_store
from rldata.quality.evalpack import read_pack
from tests.quality.helpers import gsm8k, write_jsonl
from tests.reliability.helpers import fingerprint, one_error_line, run

ITEMS = gsm8k()[:30]


@pytest.fixture
def root(tmp_path, capsys):
    """A store of 40 GSM8K test problems (5 of them copied with a prefix) as tasks, and an eval file of
    the first 30 test problems."""
    rows = [{"question": r["question"], "answer": r["answer"]} for r in gsm8k()[30:65]]
    rows += [{"question": "Problem: " + r["question"], "answer": r["answer"]} for r in ITEMS[:5]]
    write_jsonl(tmp_path / "train.jsonl", rows)
    write_jsonl(tmp_path / "eval.jsonl", ITEMS)
    root = str(tmp_path / "store")
    assert run(capsys, "--store", root, "ingest", str(tmp_path / "train.jsonl"), "--preset", "gsm8k")[0] == 0
    return root


def _copies(store) -> set[str]:
    return set(store.sql("SELECT task_id FROM tasks WHERE prompt LIKE 'Problem: %'").pl()["task_id"])


def test_flag_records_every_match_and_a_rerun_writes_nothing(root, tmp_path, capsys):
    code, out, err = run(
        capsys, "--store", root, "decontaminate", "--eval", str(tmp_path / "eval.jsonl"), "--format", "json"
    )
    assert code == 0, err
    assert "5 of 40 tasks flagged" in err and "'eval'" in err
    rows = json.loads(out)
    store = open_store(root)
    assert {r["task_id"] for r in rows} == _copies(store)
    assert {r["method"] for r in rows} == {"ngram", "coverage", "minhash"} and len(rows) == 15
    stored = store.read("contamination")
    assert stored.height == 15 and set(stored["action"]) == {"flag"} and stored["run_id"].n_unique() == 1
    assert stored["detector_version"].str.starts_with(stored["method"]).all()
    assert (stored["score"] >= stored["threshold"]).all() and stored["span"].str.len_chars().min() > 40
    # the pack is stored as data: 30 items under its name and content version
    items = store.read("eval_items")
    assert items.height == 30 and set(items["pack"]) == {"eval"} and items["pack_version"].n_unique() == 1
    assert items["origin"].str.ends_with(":1").sum() == 1 and store.count("tasks") == 40  # flag keeps them
    run_row = store.sql("SELECT kind, status, summary FROM runs WHERE kind = 'decontaminate'").fetchall()
    assert [r[:2] for r in run_row] == [("decontaminate", "done")] and json.loads(run_row[0][2])[
        "flagged"
    ] == 5
    # the same run again: nothing changes in the data tables (a run row is all it adds)
    before = {t: store.version(t) for t in ("contamination", "eval_items", "tasks")}
    assert run(capsys, "--store", root, "decontaminate", "--eval", str(tmp_path / "eval.jsonl"))[0] == 0
    assert {t: store.version(t) for t in before} == before
    # the stored pack alone (no file), stricter: the coverage rows stay, the others go as stale
    code, _, err = run(
        capsys,
        "--store",
        root,
        "decontaminate",
        "--name",
        "eval",
        "--method",
        "ngram,minhash",
        "--jaccard",
        "0.99",
    )
    assert code == 0 and "no longer found" in err, err
    left = store.read("contamination")
    assert set(left["method"]) == {"ngram", "coverage"} and left.height == 10


def test_drop_removes_the_tasks_and_keeps_the_record(root, tmp_path, capsys):
    store = open_store(root)
    copies = _copies(store)
    code, _, err = run(
        capsys, "--store", root, "decontaminate", "--eval", str(tmp_path / "eval.jsonl"), "--action", "drop"
    )
    assert code == 0 and "5 of 40 tasks dropped" in err, err
    assert store.count("tasks") == 35 and not copies & set(store.read("tasks")["task_id"])
    rows = store.read("contamination")
    assert set(rows["task_id"]) == copies and set(rows["action"]) == {"drop"}
    # rerun: the dropped tasks are gone, their rows stay, nothing more is written
    v = {t: store.version(t) for t in ("contamination", "tasks")}
    assert run(capsys, "--store", root, "decontaminate", "--name", "eval", "--action", "drop")[0] == 0
    assert {t: store.version(t) for t in v} == v and store.read("contamination").height == 15


def test_dry_run_and_where(root, tmp_path, capsys):
    before = fingerprint(root)
    code, out, err = run(
        capsys,
        "--store",
        root,
        "decontaminate",
        "--eval",
        str(tmp_path / "eval.jsonl"),
        "--dry-run",
        "--format",
        "csv",
    )
    assert code == 0 and "dry run, nothing written" in err
    assert len(pl.read_csv(out.encode())) == 15 and fingerprint(root) == before
    code, _, err = run(
        capsys, "--store", root, "decontaminate", "--eval", str(tmp_path / "eval.jsonl"),
        "--where", "prompt NOT LIKE 'Problem: %'",
    )  # fmt: skip
    assert code == 0 and "0 of 35 tasks flagged" in err


def test_a_changed_file_is_a_new_version_of_the_pack(tmp_path):
    a = read_pack(write_jsonl(tmp_path / "a.jsonl", ITEMS[:3]))
    b = read_pack(write_jsonl(tmp_path / "a.jsonl", ITEMS[:3][::-1]))  # reordered: same items
    c = read_pack(write_jsonl(tmp_path / "a.jsonl", ITEMS[:4]))
    dup = read_pack(
        write_jsonl(tmp_path / "a.jsonl", [*ITEMS[:3], {"question": "  " + ITEMS[0]["question"]}])
    )
    assert a.version == b.version == dup.version != c.version and dup.size == 3 and a.name == "a"
    assert a.items["answer"].to_list()[0] == ITEMS[0]["answer"]  # no preset: the answer column as text


BAD = {
    "bad.jsonl": ('{"question": "What is 2+2?"}\n{"question": \n', "bad.jsonl:2: invalid JSON"),
    "type.jsonl": ('{"question": "a b c d"}\n{"question": 5}\n', "type.jsonl:2: field 'question': expected text, got number"),
    "empty_prompt.jsonl": ('{"question": "a b"}\n{"question": "   "}\n', "empty_prompt.jsonl:2: field 'question': missing or empty prompt"),
    "noprompt.jsonl": ('{"text": "a b"}\n', "noprompt.jsonl: field 'prompt': no prompt column"),
    "answer.jsonl": ('{"question": "a b", "answer": [1, 2]}\n', "answer.jsonl:1: field 'answer': expected text or a number"),
    "cell.csv": ("question,answer\nwhat is 1,2\n,3\n", "cell.csv:3: field 'question': missing"),
    "empty.jsonl": ("", "empty.jsonl: no eval items"),
    "eval.txt": ("what\n", "eval.txt: unknown file type '.txt'"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_eval_file_is_one_line_naming_file_line_and_field_and_the_store_is_unchanged(
    root, tmp_path, capsys, name
):
    text, want = BAD[name]
    (tmp_path / name).write_text(text)
    before = fingerprint(root)
    code, out, err = run(capsys, "--store", root, "decontaminate", "--eval", str(tmp_path / name))
    assert code == 1 and out == ""
    assert want in one_error_line(err)
    assert fingerprint(root) == before  # no pack, no row, no run recorded


def test_a_missing_pack_or_file_is_named(root, tmp_path, capsys):
    code, _, err = run(capsys, "--store", root, "decontaminate", "--name", "math500")
    assert code == 1 and "no eval pack 'math500'" in one_error_line(err)
    code, _, err = run(capsys, "--store", root, "decontaminate", "--eval", str(tmp_path / "nope.jsonl"))
    assert code == 1 and "nope.jsonl: no such file" in one_error_line(err)
    code, _, err = run(
        capsys, "--store", root, "decontaminate", "--eval-sample", "gsm8k-test", "--method", "ngram,fuzzy"
    )
    assert code == 1 and "--method" in err and "unknown 'fuzzy'" in one_error_line(err)
    code, _, err = run(capsys, "--store", root, "decontaminate")
    assert code == 1 and "--eval" in one_error_line(err)
