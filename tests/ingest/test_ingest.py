"""Ingest against a real Delta store: every format, preset, mapping, error mode, dedup and decontamination."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rldata import open_store
from rldata.errors import InputError
from rldata.ingest import (
    contaminated,
    eval_ngrams,
    ingest,
    load_tasks,
    normalize_text,
    preset,
    sample_path,
    task_id,
)
from rldata.ingest import read as ingest_read
from rldata.ingest.mapping import normalize_series
from rldata.ingest.presets import Fields, gsm8k_answer, last_boxed


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def tasks_of(store) -> dict[str, dict]:
    return {r["prompt"]: r for r in store.read("tasks").to_dicts()}


ROWS = [{"prompt": f"What is {i} plus {i}?", "answer": str(2 * i)} for i in range(5)]


# ---- normalization and ids ----------------------------------------------------------------------
TRICKY = [
    "  a\tb\n\nc  ",
    "x\u00a0\u00a0y",
    "ﬁne　ｆｕｌｌ",
    "line\u2028sep",
    "a \u2003 b",
    "plain",
    "",
    "\x1cq",
]


def test_normalize_collapses_whitespace_and_applies_nfkc():
    assert normalize_text("  a\tb\n\nc  ") == "a b c"
    assert normalize_text("ﬁne　ｆｕｌｌ") == "fine full"
    assert normalize_text("x\u00a0\u00a0y") == "x y"


def test_vectorized_normalize_agrees_with_the_python_one():
    assert normalize_series(pl.Series(TRICKY)).to_list() == [normalize_text(t) for t in TRICKY]


def test_task_id_is_stable_and_ignores_whitespace_only_differences(store, tmp_path):
    assert task_id("What  is 2+2?", " 4", "s") == task_id("What is 2+2?", "4", "s")
    assert task_id("What is 2+2?", "4", "s") != task_id("What is 2+2?", "4", "t")
    assert task_id("What is 2+2?", "4", "s") != task_id("What is 2+2?", "5", "s")
    ingest(store, write_jsonl(tmp_path / "x.jsonl", ROWS[:2]))
    for r in store.read("tasks").to_dicts():  # the vectorized ids equal the documented function
        assert r["task_id"] == task_id(r["prompt"], r["answer"], "x")
        assert len(r["task_id"]) == 64


# ---- formats ------------------------------------------------------------------------------------
def _same_tasks(store, n=5, source=None):
    got = tasks_of(store)
    assert len(got) == n
    for r in ROWS[:n]:
        assert got[r["prompt"]]["answer"] == r["answer"]
        assert got[r["prompt"]]["domain"] == "math"
        if source:
            assert got[r["prompt"]]["source"] == source


def test_jsonl_default_fields_source_from_stem(store, tmp_path):
    s = ingest(store, write_jsonl(tmp_path / "mine.jsonl", ROWS))
    assert (s.read, s.added, s.duplicates, s.rejected, s.decontaminated) == (5, 5, 0, 0, 0)
    _same_tasks(store, source="mine")


def test_parquet(store, tmp_path):
    pq.write_table(pa.Table.from_pylist(ROWS), tmp_path / "p.parquet")
    assert ingest(store, tmp_path / "p.parquet").added == 5
    _same_tasks(store, source="p")


def test_csv_with_multiline_field_and_line_numbers(store, tmp_path):
    path = tmp_path / "c.csv"
    path.write_text('prompt,answer,level\n"two\nlines",1,3\nok prompt,2,4\n,3,5\nshort row\n')
    with pytest.raises(InputError) as ei:
        ingest(store, path)
    assert str(ei.value).startswith(
        f"{path}:5: field 'prompt': missing"
    )  # the record on line 5 (after 2-line one)
    assert store.count("tasks") == 0
    s = ingest(store, path, on_error="skip")
    assert (s.added, s.rejected) == (2, 2)
    assert [str(r) for r in s.rejects] == [
        f"{path}:5: field 'prompt': missing",
        f"{path}:6: expected 3 fields, got 1",
    ]
    got = tasks_of(store)
    assert got["two\nlines"]["answer"] == "1"
    assert json.loads(got["ok prompt"]["metadata"]) == {"level": "4"}  # CSV cells are text


def test_tsv(store, tmp_path):
    (tmp_path / "t.tsv").write_text("prompt\tanswer\nA?\t1\n")
    assert ingest(store, tmp_path / "t.tsv").added == 1


def test_hugging_face_dataset_and_dataset_dict(store, tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_list(ROWS).save_to_disk(str(tmp_path / "hf"))
    assert ingest(store, tmp_path / "hf").added == 5
    _same_tasks(store, source="hf")
    dd = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_list([{"prompt": "new one", "answer": "1"}]),
            "test": datasets.Dataset.from_list([{"prompt": None, "answer": "2"}]),
        }
    )
    dd.save_to_disk(str(tmp_path / "hfdict"))
    s = ingest(store, tmp_path / "hfdict", on_error="skip")
    assert (s.added, s.rejected) == (1, 1)
    assert s.rejects[0].where == "test row 0"


def test_directory_of_files_and_json_suffix(store, tmp_path):
    (tmp_path / "d").mkdir()
    write_jsonl(tmp_path / "d" / "a.json", ROWS[:2])
    pq.write_table(pa.Table.from_pylist(ROWS[2:]), tmp_path / "d" / "b.parquet")
    s = ingest(store, tmp_path / "d")
    assert (s.read, s.added) == (5, 5)
    assert set(store.read("tasks")["source"]) == {"d"}


def test_unknown_file_type_and_missing_path(store, tmp_path):
    (tmp_path / "x.xlsx").write_text("")
    with pytest.raises(InputError, match="unknown file type '.xlsx'"):
        ingest(store, tmp_path / "x.xlsx")
    with pytest.raises(InputError, match="no such file"):
        ingest(store, tmp_path / "nope.jsonl")


def test_chunks_keep_line_numbers_across_chunk_boundaries(store, tmp_path, monkeypatch):
    monkeypatch.setattr(ingest_read, "_CHUNK_BYTES", 200)  # many chunks from a small file
    rows = [{"prompt": f"question number {i}", "answer": str(i)} for i in range(40)]
    rows[33] = {"answer": "no prompt"}
    lines = [json.dumps(r) for r in rows]
    lines.insert(10, "")  # a blank line shifts every later line number
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(lines) + "\n")
    s = ingest(store, path, on_error="skip")
    assert (s.read, s.added, s.rejected) == (40, 39, 1)
    assert str(s.rejects[0]) == f"{path}:35: field 'prompt': missing"


# ---- presets and mapping ------------------------------------------------------------------------
def test_gsm8k_preset_on_the_bundled_sample(store):
    path = sample_path("gsm8k")
    assert path.is_relative_to(Path(__import__("rldata.sample_data").sample_data.__file__).parent)
    s = ingest(store, path, fields=preset("gsm8k"))
    assert (s.read, s.added, s.rejected) == (500, 500, 0)
    first = json.loads(path.read_text().splitlines()[0])
    row = tasks_of(store)[first["question"]]
    assert row["answer"] == "72" and row["source"] == "gsm8k"
    assert json.loads(row["metadata"]) == {"solution": first["answer"]}


def test_gsm8k_answer_rules(store, tmp_path):
    rows = [{"question": "Big?", "answer": "so\n#### 1,234"}, {"question": "None?", "answer": "no marker"}]
    s = ingest(store, write_jsonl(tmp_path / "g.jsonl", rows), fields=preset("gsm8k"), on_error="skip")
    assert tasks_of(store)["Big?"]["answer"] == "1234" == gsm8k_answer(rows[0]["answer"])
    assert (
        str(s.rejects[0])
        == f"{tmp_path / 'g.jsonl'}:2: field 'answer': no '#### <answer>' line in the solution"
    )


def test_verl_preset_chat_prompt_struct_answer(store, tmp_path):
    rows = [
        {
            "data_source": "openai/gsm8k",
            "ability": "math",
            "prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1+1?"}],
            "reward_model": {"style": "rule", "ground_truth": "2"},
            "extra_info": {"split": "train", "index": 7},
        },
        {
            "data_source": "openai/gsm8k",
            "ability": "math",
            "prompt": [{"role": "system", "content": "x"}],
            "reward_model": {"style": "rule", "ground_truth": "3"},
            "extra_info": {"split": "train", "index": 8},
        },
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train.parquet")
    s = ingest(store, tmp_path / "train.parquet", fields=preset("verl"), on_error="skip")
    assert (
        str(s.rejects[0])
        == f"{tmp_path / 'train.parquet'}:row 1: field 'prompt': no user turn in the chat messages"
    )
    row = store.read("tasks").to_dicts()[0]
    assert (row["prompt"], row["answer"], row["source"], row["domain"]) == (
        "1+1?",
        "2",
        "openai/gsm8k",
        "math",
    )
    assert row["messages"] == rows[0]["prompt"]
    meta = json.loads(row["metadata"])
    assert meta["extra_info"] == {"split": "train", "index": 7}
    assert meta["reward_model"]["style"] == "rule"


def test_math_preset_boxed_answers_and_category(store, tmp_path):
    rows = [
        {
            "problem": "Half?",
            "solution": r"It is $\boxed{\frac{1}{2}}$.",
            "type": "Algebra",
            "level": "Level 2",
        },
        {"problem": "Two boxes?", "solution": r"First \boxed{1}, finally \boxed{ {2} }", "type": "Geometry"},
        {"problem": "No box?", "solution": "just text", "type": "Algebra"},
    ]
    s = ingest(store, write_jsonl(tmp_path / "m.jsonl", rows), fields=preset("math"), on_error="skip")
    got = tasks_of(store)
    assert got["Half?"]["answer"] == r"\frac{1}{2}"
    assert got["Two boxes?"]["answer"] == "{2}"
    assert got["Half?"]["category"] == "Algebra" and got["Half?"]["source"] == "math"
    assert json.loads(got["Half?"]["metadata"])["solution"] == rows[0]["solution"]
    assert s.rejects[0].reason == "no \\boxed{...} answer in the solution" and s.rejects[0].where == "3"


def test_math_500_layout_prefers_the_answer_column(store, tmp_path):
    rows = [{"problem": "P?", "solution": r"\boxed{7}", "answer": "7", "subject": "Precalculus", "level": 3}]
    ingest(store, write_jsonl(tmp_path / "m500.jsonl", rows), fields=preset("math"))
    row = store.read("tasks").to_dicts()[0]
    assert (row["answer"], row["category"]) == ("7", "Precalculus")


def test_last_boxed_edge_cases():
    assert last_boxed(r"\boxed{a}{b}") == "a"
    assert last_boxed(r"\boxed 5$") == "5"
    assert last_boxed(r"\boxed{unclosed") is None
    assert last_boxed(r"\fbox{3}") == "3"


def test_field_mapping_dotted_path_constants_and_metadata(store, tmp_path):
    rows = [
        {"q": "Mapped?", "gt": {"value": 12}, "topic": "t1", "difficulty": 3, "metadata": {"origin": "web"}}
    ]
    fields = Fields().with_overrides(prompt="q", answer="gt.value", category="topic")
    ingest(store, write_jsonl(tmp_path / "f.jsonl", rows), fields=fields, source="src", domain="algebra")
    row = store.read("tasks").to_dicts()[0]
    assert (row["prompt"], row["answer"], row["category"]) == ("Mapped?", "12", "t1")
    assert (row["source"], row["domain"]) == ("src", "algebra")
    assert json.loads(row["metadata"]) == {"gt": {"value": 12}, "difficulty": 3, "origin": "web"}


def test_answer_format_override_and_missing_prompt_column_hint(store, tmp_path):
    path = write_jsonl(tmp_path / "o.jsonl", [{"question": "Q?", "sol": "x #### 9"}])
    with pytest.raises(
        InputError, match=r"o.jsonl:1: field 'prompt': missing \(no such column; columns: question, sol\)"
    ):
        ingest(store, path)
    ingest(
        store, path, fields=Fields().with_overrides(prompt="question", answer="sol", answer_format="gsm8k")
    )
    assert store.read("tasks")["answer"].to_list() == ["9"]


def test_source_and_domain_columns_win_over_defaults_and_nulls_fall_back(store, tmp_path):
    rows = [
        {"prompt": "A", "answer": "1", "source": "s1", "domain": "code", "tests": {"public": [1]}},
        {"prompt": "B", "answer": "2", "source": None, "domain": None},
    ]
    ingest(store, write_jsonl(tmp_path / "sd.jsonl", rows))
    got = tasks_of(store)
    assert (got["A"]["source"], got["A"]["domain"]) == ("s1", "code")
    assert json.loads(got["A"]["tests"]) == {"public": [1]}
    assert (got["B"]["source"], got["B"]["domain"]) == ("sd", "math")


def test_tasks_with_tests_need_no_answer(store, tmp_path):
    rows = [{"prompt": "write f", "tests": '["assert f() == 1"]', "domain": "code"}]
    assert ingest(store, write_jsonl(tmp_path / "code.jsonl", rows)).added == 1
    assert store.read("tasks")["answer"].to_list() == [None]


# ---- malformed input ----------------------------------------------------------------------------
BAD_LINES = [
    json.dumps({"prompt": "fine", "answer": "1"}),
    '{"prompt": "broken", ',
    json.dumps({"prompt": {"nested": True}, "answer": "2"}),
    json.dumps(["an", "array"]),
    json.dumps({"answer": "3"}),
    json.dumps({"prompt": "   ", "answer": "4"}),
    json.dumps({"prompt": "no answer"}),
    json.dumps({"prompt": "numeric answer", "answer": 5}),
]
BAD_REASONS = [
    ("2", None, "invalid JSON"),
    ("3", "prompt", "expected text, got object"),
    ("4", None, "expected a JSON object, got array"),
    ("5", "prompt", "missing"),
    ("6", "prompt", "empty prompt"),
    ("7", "answer", "missing"),
]


def test_fail_mode_names_file_line_field_and_writes_nothing(store, tmp_path):
    store.append("tasks", [{"task_id": "x", "source": "s", "domain": "math", "prompt": "old", "answer": "0"}])
    before = (store.version("tasks"), store.version("runs"), store.read("tasks").to_dicts())
    path = write_jsonl(tmp_path / "bad.jsonl", BAD_LINES)
    with pytest.raises(InputError) as ei:
        ingest(store, path)
    assert str(ei.value).startswith(f"{path}:2: invalid JSON: ")
    assert "nothing was written" in str(ei.value)
    assert (store.version("tasks"), store.version("runs"), store.read("tasks").to_dicts()) == before


def test_skip_mode_lands_the_rest_and_lists_every_reject(store, tmp_path):
    path = write_jsonl(tmp_path / "bad.jsonl", BAD_LINES)
    s = ingest(store, path, on_error="skip")
    assert (s.read, s.added, s.rejected) == (8, 2, 6)
    assert [(r.where, r.field) for r in s.rejects] == [(w, f) for w, f, _ in BAD_REASONS]
    for r, (_, _, reason) in zip(s.rejects, BAD_REASONS):
        assert r.reason.startswith(reason) and r.path == str(path)
    assert set(tasks_of(store)) == {"fine", "numeric answer"}
    assert tasks_of(store)["numeric answer"]["answer"] == "5"


def test_wrong_typed_prompt_column_rejects_every_row(store, tmp_path):
    pq.write_table(pa.table({"prompt": [1, 2], "answer": ["a", "b"]}), tmp_path / "n.parquet")
    with pytest.raises(InputError, match=r"n.parquet:row 0: field 'prompt': expected text, got Int64"):
        ingest(store, tmp_path / "n.parquet")


def test_json_dates_stay_text(store, tmp_path):
    ingest(store, write_jsonl(tmp_path / "d.jsonl", [{"prompt": "When?", "answer": "2020-01-01"}]))
    assert store.read("tasks")["answer"].to_list() == ["2020-01-01"]


# ---- dedup, idempotency, decontamination --------------------------------------------------------
def test_reingesting_the_same_file_adds_nothing_and_commits_nothing(store, tmp_path):
    path = write_jsonl(tmp_path / "r.jsonl", ROWS)
    first = ingest(store, path)
    version = store.version("tasks")
    again = ingest(store, path)
    assert (first.added, again.added, again.duplicates) == (5, 0, 5)
    assert store.version("tasks") == version and store.count("tasks") == 5
    assert store.count("runs") == 2  # each ingest is recorded
    run = store.sql("SELECT kind, status, summary FROM runs ORDER BY started_at DESC LIMIT 1").fetchall()[0]
    assert run[:2] == ("ingest", "done") and json.loads(run[2])["duplicates"] == 5


def test_exact_dedup_on_normalized_prompt_within_file_and_against_store(store, tmp_path):
    rows = [
        {"prompt": "Same  question?", "answer": "1"},
        {"prompt": " Same question? ", "answer": "2"},
        {"prompt": "Other?", "answer": "3"},
    ]
    s = ingest(store, write_jsonl(tmp_path / "a.jsonl", rows))
    assert (s.added, s.duplicates) == (2, 1)
    assert tasks_of(store)["Same  question?"]["answer"] == "1"  # the first copy is kept
    s2 = ingest(store, write_jsonl(tmp_path / "b.jsonl", [{"prompt": "Other?", "answer": "9"}]))
    assert (s2.added, s2.duplicates) == (0, 1)  # same prompt from another file: still a duplicate


def test_decontamination_drops_and_counts_shared_ngrams(store, tmp_path):
    long_eval = "the quick brown fox jumps over the lazy dog near the river bank today at noon"
    eval_path = write_jsonl(tmp_path / "eval.jsonl", [{"question": long_eval}, {"question": "Short one?"}])
    rows = [
        {
            "prompt": "Story: THE quick brown fox jumps over the lazy dog near the river bank today, ok?",
            "answer": "1",
        },  # shares a 13-gram (case and punctuation aside)
        {"prompt": "the quick brown fox jumps over the lazy cat", "answer": "2"},  # only 9 shared words
        {"prompt": "short  one?", "answer": "3"},  # whole short prompt equals an eval prompt
        {"prompt": "Clean task?", "answer": "4"},
    ]
    path = write_jsonl(tmp_path / "train.jsonl", rows)
    s = ingest(store, path, decontaminate=eval_path)
    assert (s.read, s.added, s.decontaminated) == (4, 2, 2)
    assert set(tasks_of(store)) == {rows[1]["prompt"], "Clean task?"}
    s8 = ingest(open_store(tmp_path / "other"), path, decontaminate=eval_path, ngram=8)
    assert (s8.added, s8.decontaminated) == (1, 3)  # with 8-grams the cat prompt matches too


def test_eval_ngrams_and_contaminated_helpers(tmp_path):
    eval_path = write_jsonl(tmp_path / "e.jsonl", [{"prompt": "a b c d"}])
    grams = eval_ngrams(eval_path, n=3)
    assert grams == {"a b c", "b c d"}
    hits = contaminated(pl.Series(["x a b c y", "a b x c d", "b c"]), grams, n=3)
    assert hits.to_list() == [True, False, False]


def test_dry_run_counts_but_writes_nothing(store, tmp_path):
    s = ingest(store, write_jsonl(tmp_path / "dry.jsonl", ROWS), dry_run=True)
    assert s.added == 5
    assert store.count("tasks") == 0 and store.count("runs") == 0


def test_summary_counts_add_up(store, tmp_path):
    lines = BAD_LINES + [json.dumps({"prompt": "fine", "answer": "1"})]
    s = ingest(store, write_jsonl(tmp_path / "sum.jsonl", lines), on_error="skip")
    assert s.read == s.added + s.duplicates + s.rejected + s.decontaminated == 9


def test_load_tasks_without_a_store(tmp_path):
    frame, rejects, n = load_tasks(write_jsonl(tmp_path / "l.jsonl", ROWS))
    assert n == 5 and not rejects
    assert frame["__pos"].to_list() == [1, 2, 3, 4, 5]


def test_metadata_json_text_is_merged_and_other_text_kept(store, tmp_path):
    path = tmp_path / "meta.csv"
    path.write_text('prompt,answer,metadata,extra\nA?,1,"{""level"": 2}",x\n')
    ingest(store, path)
    assert json.loads(store.read("tasks")["metadata"][0]) == {"extra": "x", "level": 2}
    path2 = tmp_path / "meta2.csv"
    path2.write_text("prompt,answer,metadata\nB?,1,not json\n")
    ingest(store, path2)
    assert json.loads(tasks_of(store)["B?"]["metadata"]) == {"metadata": "not json"}


def test_empty_file_is_an_error_and_adds_nothing(store, tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(InputError, match="empty.jsonl: no records to ingest"):
        ingest(store, tmp_path / "empty.jsonl")
    assert store.version("tasks") == 0 and store.count("runs") == 0


def test_chat_content_that_is_not_text_is_rejected(store, tmp_path):
    rows = [{"prompt": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "answer": "1"}]
    with pytest.raises(InputError, match=r"field 'prompt': expected text, got List"):
        ingest(store, write_jsonl(tmp_path / "mm.jsonl", rows))
