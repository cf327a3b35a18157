"""The report's data-quality page: written when the store holds a flag, with the flags per source and
rule; a store without flags gets no page."""

from __future__ import annotations

from tests.quality.helpers import write_jsonl
from tests.reliability.helpers import banded_store, run


def test_the_report_gains_a_quality_page_once_a_task_is_flagged(tmp_path, capsys):
    root = banded_store(tmp_path / "s")
    assert run(capsys, "--store", root, "report", "-o", str(tmp_path / "r0"))[0] == 0
    assert not (tmp_path / "r0" / "quality.html").exists()
    write_jsonl(tmp_path / "ev.jsonl", [{"question": "3+1?"}])
    assert run(capsys, "--store", root, "decontaminate", "--eval", str(tmp_path / "ev.jsonl"))[0] == 0
    code, _, err = run(capsys, "--store", root, "report", "-o", str(tmp_path / "r1"), "-s", "s1")
    assert code == 0, err
    page = (tmp_path / "r1" / "quality.html").read_text()
    assert "<td>s</td><td>contaminated:ev</td><td>error</td><td>1</td>" in page
    assert "No run drew a flagged task." in page and "quality.html, quality_flags.png in" in err
    assert (tmp_path / "r1" / "quality_flags.png").read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "r1" / "index.html").exists()
