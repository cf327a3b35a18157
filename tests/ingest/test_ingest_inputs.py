"""Ingest against hostile inputs (issue 29): exact numbers, non-finite numbers, bounded records, BOMs,
invisible characters in prompts, and concurrent ingests of the same prompts (real Delta store)."""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rldata import open_store
from rldata.errors import ConfigError, InputError
from rldata.ingest import Limits, ingest, load_tasks, normalize_text
from rldata.ingest import files as ingest_files
from rldata.ingest.mapping import normalize_series
from tests.reliability.helpers import fingerprint


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _answers(store) -> dict[str, str]:
    return dict(store.read("tasks").select("prompt", "answer").iter_rows())


# ---- exact values -------------------------------------------------------------------------------
BIG = "9" * 5000


def test_answers_keep_a_json_numbers_text(tmp_path):
    src = tmp_path / "nums.jsonl"
    src.write_text(
        '{"prompt": "a", "answer": 12345678901234567890123}\n'
        '{"prompt": "b", "answer": 9223372036854775808}\n'
        '{"prompt": "c", "answer": 1.50}\n'
        '{"prompt": "d", "answer": 1e-400}\n'
        f'{{"prompt": "e", "answer": {BIG}}}\n'
        '{"prompt": "f", "answer": 0.1000000000000000055511151231257827}\n'
        '{"prompt": "g", "answer": -7}\n'
    )
    store = open_store(tmp_path / "store")
    assert ingest(store, src).added == 7
    assert _answers(store) == {
        "a": "12345678901234567890123",
        "b": "9223372036854775808",
        "c": "1.50",
        "d": "1e-400",
        "e": BIG,
        "f": "0.1000000000000000055511151231257827",
        "g": "-7",
    }


def test_other_numbers_keep_their_value_big_integers_their_digits(tmp_path):
    src = tmp_path / "meta.jsonl"
    src.write_text(
        '{"prompt": "a", "answer": "1", "level": 12345678901234567890123, "p": 0.25}\n'
        '{"prompt": "b", "answer": "2", "level": 3, "p": 1e-400}\n'
    )
    frame, rejects, _ = load_tasks(src)
    assert not rejects
    meta = [json.loads(m) for m in frame["metadata"]]
    # every digit, as text (no int type holds it); a column holding such a number is text in its block
    assert meta[0]["level"] == "12345678901234567890123" and meta[1]["level"] == "3"
    assert meta[1]["p"] == "1e-400"  # a double would make it 0.0
    assert float(meta[0]["p"]) == 0.25
    frame, _, _ = load_tasks(_write(tmp_path / "plain.jsonl", '{"prompt": "c", "answer": "3", "p": 0.25}\n'))
    assert json.loads(frame["metadata"][0])["p"] == 0.25  # without such a number it stays a number


def test_fast_path_int_answers_are_their_digits(tmp_path):
    rows = [{"prompt": f"q{i}", "answer": i * 1_000_003} for i in range(2_000)]
    src = tmp_path / "ints.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    frame, rejects, _ = load_tasks(src)
    assert not rejects and frame["answer"].to_list() == [str(r["answer"]) for r in rows]


@pytest.mark.parametrize(
    "line, field, why",
    [
        ('{"prompt": "x", "answer": NaN}', "answer", "non-finite number NaN"),
        ('{"prompt": "x", "answer": "1", "w": Infinity}', "w", "non-finite number Infinity"),
        ('{"prompt": "x", "answer": "1", "w": [1, -Infinity]}', "w", "non-finite number -Infinity"),
        ('{"prompt": "x", "answer": "1", "w": 1e400}', "w", "out of range"),
        ('{"prompt": "x", "answer": "1", "w": {"v": -1e999}}', "w", "out of range"),
    ],
)
def test_non_finite_numbers_are_refused_with_file_line_and_field(tmp_path, line, field, why):
    src = tmp_path / "bad.jsonl"
    src.write_text('{"prompt": "ok", "answer": "1", "w": 0.5}\n' + line + "\n")
    store = open_store(tmp_path / "store")
    before = fingerprint(store.root)
    with pytest.raises(InputError) as e:
        ingest(store, src)
    assert e.value.where == "2" and e.value.field == field and why in str(e.value)
    assert fingerprint(store.root) == before


def test_parquet_non_finite_answer_is_refused(tmp_path):
    src = tmp_path / "t.parquet"
    pq.write_table(pa.table({"prompt": ["a", "b", "c"], "answer": [1.5, float("inf"), float("nan")]}), src)
    frame, rejects, _ = load_tasks(src, on_error="skip")
    assert frame["answer"].to_list() == ["1.5"]
    assert [(r.where, r.field) for r in rejects] == [("row 1", "answer"), ("row 2", "answer")]
    assert all("non-finite" in r.reason for r in rejects)


# ---- bounded records ----------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [1_000, 20_000])
def test_deeply_nested_json_is_one_reject_not_a_crash(tmp_path, depth):
    src = tmp_path / "deep.jsonl"
    deep = "[" * depth + "]" * depth
    src.write_text(
        '{"prompt": "ok", "answer": "1"}\n'
        f'{{"prompt": "x", "answer": "1", "m": {deep}}}\n'
        '{"prompt": "braces {{{{ in text", "answer": "2", "m": [[1]]}\n'
    )
    store = open_store(tmp_path / "store")
    s = ingest(store, src, on_error="skip")
    assert (s.added, s.rejected) == (2, 1)
    assert s.rejects[0].where == "2" and "nested deeper than the limit of 100" in s.rejects[0].reason
    with pytest.raises(InputError, match=r"deep.jsonl:2: JSON nested deeper"):
        ingest(open_store(tmp_path / "s2"), src)


def test_a_line_over_the_default_limit_is_rejected(tmp_path):
    src = tmp_path / "long.jsonl"
    with open(src, "w") as f:
        f.write('{"prompt": "short", "answer": "1"}\n')
        f.write(json.dumps({"prompt": "p" * (17 << 20), "answer": "1"}) + "\n")  # a 17 MB prompt
    frame, rejects, _ = load_tasks(src, on_error="skip")
    assert frame["prompt"].to_list() == ["short"]
    assert rejects[0].where == "2" and "over the limit of 16777216" in rejects[0].reason


def test_prompt_and_field_limits_name_the_field(tmp_path):
    src = tmp_path / "big.jsonl"
    src.write_text(
        json.dumps({"prompt": "p" * 1_000_001, "answer": "1"})
        + "\n"
        + json.dumps({"prompt": "fine", "answer": "1", "notes": "n" * ((4 << 20) + 1)})
        + "\n"
        + json.dumps({"prompt": "é" * 300_000, "answer": "1"})  # 600 KB, 300,000 characters
        + "\n"
    )
    frame, rejects, _ = load_tasks(src, on_error="skip")
    assert [(r.where, r.field) for r in rejects] == [("1", "prompt"), ("2", "notes")]
    assert "prompt of 1000001 characters" in rejects[0].reason
    assert "text of 4194305 bytes" in rejects[1].reason
    assert frame.height == 1
    small = Limits(prompt_chars=10, field_bytes=100, line_bytes=1 << 30, depth=2)
    frame, rejects, _ = load_tasks(src, on_error="skip", limits=small)
    assert frame is None or frame.height == 0
    assert len(rejects) == 3


def test_limits_are_checked_and_parsed():
    assert Limits.parse(["depth=7", "prompt-chars=1_000"]) == Limits(depth=7, prompt_chars=1000)
    for bad in (["depth"], ["nope=1"], ["depth=x"], ["depth=0"], ["line_bytes=-1"]):
        with pytest.raises(ConfigError):
            Limits.parse(bad)


# ---- byte-order marks ---------------------------------------------------------------------------
def test_utf8_bom_csv_and_jsonl_are_accepted(tmp_path):
    csv_file = tmp_path / "excel.csv"
    csv_file.write_bytes(b"\xef\xbb\xbfprompt,answer\n1+1?,2\n")
    jsonl = tmp_path / "notepad.jsonl"
    jsonl.write_bytes(b'\xef\xbb\xbf{"prompt": "2+2?", "answer": "4"}\n')
    store = open_store(tmp_path / "store")
    assert ingest(store, csv_file).added == 1
    assert ingest(store, jsonl).added == 1
    assert _answers(store) == {"1+1?": "2", "2+2?": "4"}


# ---- invisible characters -----------------------------------------------------------------------
VARIANTS = [
    "What is 2+2?",
    "What\u200b is 2+2?",  # zero-width space
    "What is\u200d 2+2?",  # zero-width joiner
    "\u202bWhat is 2+2?\u202c",  # right-to-left embedding ... pop
    "\u2067What is 2+2?\u2069",  # right-to-left isolate
    "What is 2\u200e+2?",  # left-to-right mark
    "\ufeffWhat is 2+2?",  # a BOM inside the text
    "What is 2\u00ad+2?",  # soft hyphen
]


def test_invisible_characters_do_not_change_the_normalized_prompt():
    assert {normalize_text(v) for v in VARIANTS} == {"What is 2+2?"}
    import polars as pl

    assert normalize_series(pl.Series(VARIANTS)).to_list() == [normalize_text(v) for v in VARIANTS]


def test_zero_width_and_rtl_variants_are_duplicates(tmp_path):
    store = open_store(tmp_path / "store")
    first = tmp_path / "a.jsonl"
    first.write_text(json.dumps({"prompt": VARIANTS[0], "answer": "4"}) + "\n")
    assert ingest(store, first).added == 1
    rest = tmp_path / "b.jsonl"
    rest.write_text("".join(json.dumps({"prompt": v, "answer": "4"}) + "\n" for v in VARIANTS[1:]))
    s = ingest(store, rest)
    assert (s.added, s.duplicates) == (0, len(VARIANTS) - 1)
    assert store.count("tasks") == 1


# ---- concurrent ingests -------------------------------------------------------------------------
def _prompts_file(path: Path, answer_offset: int, n: int = 2_000) -> Path:
    path.write_text(
        "".join(
            json.dumps({"prompt": f"task {i}", "answer": str(i + answer_offset)}) + "\n" for i in range(n)
        )
    )
    return path


def test_an_ingest_that_loses_the_race_reads_again(tmp_path, monkeypatch):
    """Another ingest of the same prompts (other answers) lands between this one's read and its
    commit: the commit is refused, the retry finds every prompt known, and the store holds one set."""
    store = open_store(tmp_path / "store")
    mine = _prompts_file(tmp_path / "mine.jsonl", 0, 50)
    theirs = _prompts_file(tmp_path / "theirs.jsonl", 1000, 50)
    real = ingest_files._drop_known
    calls = []

    def racing(new, st, version):
        calls.append(version)
        if len(calls) == 1:  # after this ingest read the store, the other one commits
            ingest(open_store(store.root), theirs)
        return real(new, st, version)

    monkeypatch.setattr(ingest_files, "_drop_known", racing)
    s = ingest(store, mine)
    assert len(calls) >= 3  # mine (stale), theirs, mine again
    assert (s.added, s.duplicates) == (0, 50)
    assert _answers(store) == {f"task {i}": str(i + 1000) for i in range(50)}


def _ingest_in_child(root: str, path: str, start, out) -> None:
    from rldata import open_store as _open
    from rldata.ingest import ingest as _ingest

    start.wait()
    out.put(_ingest(_open(root), path).added)


@pytest.mark.slow
def test_concurrent_ingests_of_the_same_prompts_end_as_serial_ones(tmp_path):
    root = tmp_path / "store"
    open_store(root)
    files = [_prompts_file(tmp_path / f"f{k}.jsonl", 1000 * k) for k in range(3)]
    ctx = mp.get_context("spawn")  # deltalake's runtime panics in a forked child
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_ingest_in_child, args=(str(root), str(f), start, out)) for f in files]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(180)
        assert p.exitcode == 0
    added = sorted(out.get(timeout=5) for _ in procs)
    assert added == [0, 0, 2_000]
    answers = _answers(open_store(root))
    assert len(answers) == 2_000 and open_store(root).count("tasks") == 2_000
    offsets = {int(a) - int(p.split()[1]) for p, a in answers.items()}
    assert len(offsets) == 1  # every answer from one file, as if the three ran one after another
