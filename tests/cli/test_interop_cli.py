"""`rldata export`, `rldata import-rollouts` and `rldata lineage` end to end through the CLI."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from rldata.cli import main


@pytest.fixture
def root(store):
    store.append(
        "tasks",
        [
            {
                "task_id": f"t{i}",
                "source": "arith",
                "domain": "math",
                "prompt": f"{i}+3=",
                "answer": str(i + 3),
            }
            for i in range(4)
        ],
    )
    store.append(
        "selections",
        [
            {
                "selection": "band",
                "task_id": f"t{i}",
                "decision": "keep",
                "reason": "in_band",
                "bucket": "easy" if i < 2 else "hard",
                "passrates_version": 2,
                "params": json.dumps({"low": 0.1}),
            }
            for i in range(4)
        ],
    )
    return store.root


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_export_then_lineage(root, tmp_path, capsys):
    out = tmp_path / "verl"
    code, _, err = run(
        capsys,
        "--store",
        root,
        "export",
        "--selection",
        "band",
        "--bucket",
        "hard",
        "--format",
        "verl",
        "--out",
        str(out),
    )
    assert code == 0, err
    assert "exported 2 tasks of selection 'band' as verl" in err
    rows = pq.read_table(out / "train.parquet").to_pylist()
    assert [r["extra_info"]["task_id"] for r in rows] == ["t2", "t3"]

    code, text, err = run(capsys, "lineage", str(out), "--json")
    assert code == 0, err
    m = json.loads(text)
    assert (m["selection"], m["bucket"], m["rows"], m["verified"], m["passrates_version"]) == (
        "band",
        "hard",
        2,
        True,
        2,
    )

    code, text, _ = run(capsys, "lineage", str(out / "train.parquet"))
    assert code == 0
    assert "content_hash" in text and m["content_hash"][:20] in text and "verified" in text

    (out / "train.parquet").write_bytes(b"tampered")
    code, _, err = run(capsys, "lineage", str(out), "--check")
    assert code == 1
    assert "export changed since it was written: train.parquet: modified since export" in err


def test_export_errors_are_one_line(root, tmp_path, capsys):
    code, out, err = run(
        capsys,
        "--store",
        root,
        "export",
        "--selection",
        "nope",
        "--format",
        "jsonl",
        "--out",
        str(tmp_path / "x"),
    )
    assert code == 1 and out == ""
    assert err.strip() == "rldata: error: unknown selection 'nope'; known selections: band"
    code, _, err = run(
        capsys,
        "--store",
        root,
        "export",
        "-s",
        "band",
        "-f",
        "openrlhf",
        "-o",
        str(tmp_path / "x"),
        "--input-key",
        "k",
        "--label-key",
        "k",
    )
    assert code == 1 and "input_key and label_key must differ" in err
    assert not (tmp_path / "x").exists()


def test_import_rollouts_then_sql(root, tmp_path, capsys):
    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "1.jsonl").write_text(
        "".join(
            json.dumps({"input": f"{i}+3=", "output": str(i + 3), "gts": str(i + 3), "score": 1.0, "step": 1})
            + "\n"
            for i in range(4)
        )
    )
    code, text, err = run(
        capsys, "--store", root, "import-rollouts", str(dump), "--format", "verl", "--model", "qwen", "--json"
    )
    assert code == 0, err
    summary = json.loads(text)
    assert (summary["trajectories_added"], summary["tasks_linked"], summary["tasks_added"]) == (4, 4, 0)
    code, text, err = run(
        capsys,
        "--store",
        root,
        "sql",
        "--format",
        "json",
        "SELECT model, count(*) AS n, avg(reward) AS r FROM trajectories GROUP BY model",
    )
    assert code == 0, err
    assert json.loads(text) == [{"model": "qwen", "n": 4, "r": 1.0}]


def test_import_bad_line_fails_or_is_skipped(root, tmp_path, capsys):
    f = tmp_path / "r.jsonl"
    f.write_text(json.dumps({"q": "0+3=", "a": "3"}) + "\n" + json.dumps({"q": "1+3="}) + "\n")
    code, _, err = run(
        capsys,
        "--store",
        root,
        "import-rollouts",
        str(f),
        "-f",
        "jsonl",
        "--field",
        "prompt=q",
        "--field",
        "completion=a",
    )
    assert code == 1
    assert err.strip() == f"rldata: error: {f}:2: field 'a': missing required field"
    code, text, err = run(
        capsys,
        "--store",
        root,
        "import-rollouts",
        str(f),
        "-f",
        "jsonl",
        "--field",
        "prompt=q",
        "--field",
        "completion=a",
        "--on-error",
        "skip",
        "--json",
    )
    assert code == 0, err
    assert f"skipped: {f}:2: field 'a': missing required field" in err
    assert json.loads(text)["trajectories_added"] == 1
    code, _, err = run(capsys, "--store", root, "import-rollouts", str(f), "-f", "jsonl", "--field", "prompt")
    assert code == 1 and "expected NAME=KEY" in err


def test_each_format_takes_its_own_options(root, tmp_path, capsys):
    """--option KEY=VALUE sets the chosen format's options (typed as declared); a key the format does
    not have is refused, naming the keys it has; the old per-format flags still work, with a warning."""
    base = ("--store", root, "export", "-s", "band", "-f", "openrlhf")
    code, _, err = run(
        capsys, *base, "-o", str(tmp_path / "o"), "-O", "input_key=question", "-O", "label_key=gold"
    )
    assert code == 0, err
    rows = [json.loads(x) for x in (tmp_path / "o" / "train.jsonl").read_text().splitlines()]
    assert set(rows[0]) >= {"question", "gold"} and "input" not in rows[0]
    manifest = json.loads((tmp_path / "o" / "rldata-manifest.json").read_text())
    assert manifest["options"] == {"prompt_style": "auto", "input_key": "question", "label_key": "gold"}
    assert manifest["chat_template"] == "off"  # measured raw: auto wrote text prompts
    # an option of another format
    code, _, err = run(capsys, *base, "-o", str(tmp_path / "x"), "-O", "answer_column=sol")
    assert code == 1 and not (tmp_path / "x").exists()
    assert (
        "export format 'openrlhf' has no option 'answer_column'; its options: prompt_style, input_key, label_key"
        in err
    )
    # typed: shard_rows is an integer
    hf = ("--store", root, "export", "-s", "band", "-f", "hf")
    code, _, err = run(capsys, *hf, "-o", str(tmp_path / "h"), "-O", "shard_rows=2")
    assert code == 0, err
    assert len(list((tmp_path / "h" / "data").glob("*.parquet"))) == 2  # 4 rows, 2 a shard
    code, _, err = run(capsys, *hf, "-o", str(tmp_path / "y"), "-O", "shard_rows=many")
    assert code == 1 and "shard_rows must be an integer" in err
    code, _, err = run(capsys, *hf, "-o", str(tmp_path / "z"), "-O", "shard_rows")
    assert code == 1 and "expected KEY=VALUE" in err
    # the deprecated flag: same files, and a warning naming the replacement
    code, _, err = run(
        capsys, *base, "-o", str(tmp_path / "d"), "--input-key", "question", "--label-key", "gold"
    )
    assert code == 0 and "--input-key, --label-key deprecated: use -O KEY=VALUE" in err
    assert (tmp_path / "d" / "train.jsonl").read_text() == (tmp_path / "o" / "train.jsonl").read_text()


def test_import_formats_take_their_options_and_unknown_names_are_listed(root, tmp_path, capsys):
    f = tmp_path / "r.jsonl"
    f.write_text(json.dumps({"q": "0+3=", "a": "3"}) + "\n")
    imp = ("--store", root, "import-rollouts", str(f))
    code, text, err = run(capsys, *imp, "-f", "jsonl", "-O", "prompt=q", "-O", "completion=a", "--json")
    assert code == 0, err
    assert json.loads(text)["trajectories_added"] == 1
    code, _, err = run(capsys, *imp, "-f", "jsonl", "-O", "reward_columns=a")
    assert code == 1 and "import format 'jsonl' has no option 'reward_columns'" in err
    code, _, err = run(capsys, *imp, "-f", "openrlhf")
    assert code == 2 and "unknown import format 'openrlhf'; known: verl, trl, jsonl" in err
