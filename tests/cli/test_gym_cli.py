"""``rldata ingest --gym``: one-line errors that leave the store unchanged, and reasoning_gym imported only
for ``--gym`` (a blocked import stands in for an install without the extra)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("reasoning_gym")

from rldata import open_store
from rldata.cli import main

TABLES = ("tasks", "environments", "runs")

# Run rldata in a fresh interpreter where `import reasoning_gym` fails as it does without the extra.
BLOCKED = textwrap.dedent("""
    import sys
    class _NoGym:
        def find_spec(self, name, path=None, target=None):
            if name == "reasoning_gym" or name.startswith("reasoning_gym."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    if {block}:
        sys.meta_path.insert(0, _NoGym())
    from rldata.cli import main
    code = main(sys.argv[1:])
    print("imported:", "reasoning_gym" in sys.modules, file=sys.stderr)
    sys.exit(code)
""")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _fresh(*argv, block: bool):
    return subprocess.run(
        [sys.executable, "-c", BLOCKED.replace("{block}", str(block)), *argv],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def root(tmp_path, capsys):
    root = str(tmp_path / "s")
    code, _, err = run(capsys, "--store", root, "ingest", "--gym", "leg_counting", "--n", "5")
    assert code == 0, err
    return root


def _versions(root):
    s = open_store(root)
    return {t: s.version(t) for t in TABLES}


def test_ingest_gym_then_again(root, capsys):
    code, out, err = run(
        capsys,
        "--store",
        root,
        "ingest",
        "--gym",
        "chain_sum",
        "--n",
        "20",
        "--config",
        '{"min_terms": 3, "max_terms": 3}',
        "--seed",
        "4",
        "-f",
        "json",
    )
    assert code == 0, err
    assert json.loads(out)[0] | {"version": None} == {
        "path": "reasoning-gym:chain_sum",
        "read": 20,
        "added": 20,
        "duplicates": 0,
        "rejected": 0,
        "decontaminated": 0,
        "version": None,
    }
    assert "reasoning-gym:chain_sum: generated 20, added 20, duplicates 0" in err
    before = _versions(root)
    code, _, err = run(
        capsys,
        "--store",
        root,
        "ingest",
        "--gym",
        "chain_sum",
        "--n",
        "20",
        "--config",
        '{"min_terms": 3, "max_terms": 3}',
        "--seed",
        "4",
    )
    assert code == 0 and "added 0, duplicates 20" in err
    after = _versions(root)
    assert after["tasks"] == before["tasks"] and after["environments"] == before["environments"]
    s = open_store(root)
    assert s.count("tasks") == 25 and s.count("environments") == 2
    assert s.sql(
        "SELECT DISTINCT json_extract(metadata, '$.reasoning_gym.config.min_terms')::INT FROM tasks "
        "WHERE category = 'chain_sum'"
    ).fetchall() == [(3,)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--gym", "chain_sun", "--n", "5"],
            "unknown reasoning-gym dataset 'chain_sun'; did you mean chain_sum",
        ),
        (
            ["--gym", "chain_sum", "--n", "5", "--config", '{"min_terms": 9, "max_terms": 2}'],
            'reasoning-gym dataset \'chain_sum\' rejected the config {"min_terms": 9, "max_terms": 2}: AssertionError',
        ),
        (
            ["--gym", "chain_sum", "--n", "5", "--config", '{"bogus": 1}'],
            "unexpected keyword argument 'bogus'",
        ),
        (["--gym", "chain_sum", "--n", "5", "--config", "{bad"], "--config: not valid JSON"),
        (
            ["--gym", "chain_sum", "--n", "5", "--config", "[1, 2]"],
            "--config: config must be a mapping (a JSON object), got list",
        ),
        (
            ["--gym", "chain_sum", "--n", "5", "--config", '{"size": 9}'],
            "--config: reasoning-gym config: 'size' is set by n",
        ),
        (["--gym", "chain_sum", "--n", "0"], "--n: n must be at least 1, got 0"),
        (["--gym", "chain_sum", "--n", "-3"], "--n: n must be at least 1, got -3"),
        (["--gym", "chain_sum"], "--n: gym needs n (how many entries to generate)"),
        (["--gym", "rearc", "--n", "2"], "does not survive JSON storage"),
        (["--gym", "graph_color", "--n", "2"], "no oracle answer"),
        (["--gym", "gsm_symbolic", "--n", "2"], "too lenient to be a reward"),
        (
            ["somefile.jsonl", "--gym", "chain_sum", "--n", "2"],
            "give exactly one of path, sample or gym",
        ),
        (["--sample", "arith", "--n", "2"], "--n: n and config go with gym"),
    ],
)
def test_bad_input_is_one_line_and_changes_nothing(root, capsys, args, message):
    before = _versions(root)
    code, out, err = run(capsys, "--store", root, "ingest", *args)
    assert code != 0 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rldata: error: ") and message in lines[0], err
    assert _versions(root) == before


@pytest.mark.slow
def test_without_reasoning_gym(root):
    before = _versions(root)
    p = _fresh("--store", root, "ingest", "--gym", "chain_sum", "--n", "3", block=True)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 1 and lines[0].startswith(
        "rldata: error: reasoning-gym is not installed (pip install 'rldata[gym]')"
    ), p.stderr
    assert _versions(root) == before
    # a file ingest works without it, and never imports it even when it is installed
    for block in (True, False):
        p = _fresh("--store", root, "ingest", "--sample", "arith", block=block)
        assert p.returncode == 0 and "imported: False" in p.stderr, p.stderr


@pytest.mark.slow
def test_envs_and_verifiers_load_without_reasoning_gym(tmp_path):
    script = BLOCKED.split("from rldata.cli")[0].replace("{block}", "True") + textwrap.dedent("""
        from rldata.envs import EnvSpec, make_env, resolve
        from rldata.errors import RldataError
        from rldata.verify import for_domain, get_verifier
        assert resolve("single-turn") and resolve("reasoning-gym").version.startswith("1-rg")
        try:
            make_env(EnvSpec("reasoning-gym", config={"dataset": "chain_sum"}))
        except RldataError as e:
            print("env:", e)
        v = for_domain("reasoning-gym")
        meta = '{"reasoning_gym": {"dataset": "chain_sum", "config": {}, "seed": 0, "size": 1, "index": 0}, ' \\
               '"entry": {"question": "1+1", "answer": "2", "metadata": {}}}'
        (vd,) = v.verify("<answer>2</answer>", {"answer": "2", "metadata": meta})
        print("verdict:", vd.passed, vd.error)
        print("math:", get_verifier("math").name)
    """)
    p = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr
    assert "env: reasoning-gym is not installed" in p.stdout
    assert "verdict: None reasoning-gym is not installed" in p.stdout and "math: math" in p.stdout
