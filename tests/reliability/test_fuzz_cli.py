"""Malformed inputs through the CLI, one per line of tests/data/fuzz_cli.txt: each must exit non-zero
with exactly one `rldata: error: ...` line on stderr (naming what was wrong), no traceback, nothing
on stdout, and leave every file of the store byte-identical.

The cases run in one process through ``rldata.cli.main`` (what the console script calls), which has
the same stdout/stderr/exit-code behaviour as a subprocess and keeps the corpus fast.
"""

from __future__ import annotations

import codecs
import shlex
from pathlib import Path

import pytest

from rldata.cli import main
from tests.reliability.helpers import banded_store, fingerprint

CORPUS = Path(__file__).resolve().parents[1] / "data" / "fuzz_cli.txt"


def _cases() -> list[tuple[str, str]]:
    cases = []
    for line in CORPUS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            args, _, expect = line.partition("\t")
            cases.append((args, expect.strip()))
    return cases


def test_corpus_is_large_enough():
    assert len(_cases()) >= 100


@pytest.fixture(scope="module")
def store_root(tmp_path_factory):
    return Path(banded_store(tmp_path_factory.mktemp("fuzz") / "store"))


def _expand(args: str, store: Path, tmp: Path) -> list[str]:
    argv = []
    for word in shlex.split(
        args.replace("{store}", str(store))
        .replace("{missing}", str(tmp / "missing"))
        .replace("{tmp}", str(tmp))
    ):
        if word.startswith("@") and "=" in word:
            name, _, body = word[1:].partition("=")
            path = tmp / name
            path.write_bytes(codecs.escape_decode(body.encode("utf-8", "surrogateescape"))[0])
            word = str(path)
        argv.append(word)
    if "--store" not in argv:
        argv = ["--store", str(store), *argv]
    return argv


@pytest.mark.parametrize("args, expect", _cases(), ids=[c[0][:60] for c in _cases()])
def test_malformed_input(store_root, tmp_path, capsys, monkeypatch, args, expect):
    monkeypatch.delenv("RLDATA_DEBUG", raising=False)
    monkeypatch.chdir(tmp_path)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    argv = _expand(args, store_root, scratch)
    capsys.readouterr()
    before = fingerprint(store_root)
    code = main(argv)
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code != 0, (argv, out, err)
    assert len(lines) == 1 and lines[0].startswith("rldata: error: "), err
    assert "Traceback" not in err and out == ""
    assert expect in lines[0], (expect, lines[0])
    assert fingerprint(store_root) == before
    assert not (tmp_path / "rldata-store").exists()
