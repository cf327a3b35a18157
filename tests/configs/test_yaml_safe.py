"""The one YAML loader (rldata.configs.yaml_safe): alias bombs, recursive aliases and deep nesting are refused
quickly; ordinary documents, anchors included, load as yaml.safe_load loads them; nothing else in the
code base calls PyYAML's loaders directly."""

from __future__ import annotations

import ast
import itertools
import time
from pathlib import Path

import pytest
import yaml

from rldata.configs.yaml_safe import MAX_VALUES, YAMLLimitError, safe_load

ROOT = Path(__file__).resolve().parents[2]


def _bomb(levels: int = 9, width: int = 9) -> str:
    names = [f"l{i}" for i in range(levels)]
    lines = [f"{names[0]}: &{names[0]} [" + ", ".join(["lol"] * width) + "]"]
    for prev, cur in itertools.pairwise(names):
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * width) + "]")
    return "\n".join(lines) + "\n"


def test_alias_bomb_is_refused_quickly():
    t = time.perf_counter()
    with pytest.raises(YAMLLimitError, match="alias bomb"):
        safe_load(_bomb())  # 9**9 = 387 million strings once expanded
    assert time.perf_counter() - t < 5  # generous: the count is memoized, not expanded


def test_recursive_alias_and_deep_nesting_are_refused():
    with pytest.raises(YAMLLimitError, match="recursive alias"):
        safe_load("a: &a [1, *a]\n")
    with pytest.raises(YAMLLimitError, match="nested deeper"):
        safe_load("[" * 5_000 + "]" * 5_000)
    with pytest.raises(YAMLLimitError, match="nested deeper"):
        safe_load("- " * 80 + "1\n")


def test_it_is_a_yaml_error_with_a_problem_like_the_parsers_own():
    with pytest.raises(yaml.YAMLError) as e:
        safe_load(_bomb())
    assert e.value.problem and e.value.problem_mark is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "a: 1\nb: [1, 2.5, x]\nc: {d: null, e: true}\n",
        "base: &base {lr: 0.001, steps: 10}\nrun1: *base\nrun2: {<<: *base, steps: 20}\n",
        "- " * 30 + "1\n",
        "when: 2024-01-01\n",
    ],
)
def test_ordinary_documents_load_as_safe_load_loads_them(text):
    assert safe_load(text) == yaml.safe_load(text)


def test_a_document_just_under_the_bound_loads():
    items = ", ".join(["1"] * (MAX_VALUES // 10))
    assert len(safe_load(f"a: &a [{items}]\nb: [*a, *a, *a, *a, *a]\n")["b"]) == 5


def test_no_module_calls_pyyaml_loaders_directly():
    loaders = {"load", "safe_load", "full_load", "unsafe_load", "load_all", "safe_load_all", "full_load_all"}
    hits = []
    for path in [*ROOT.joinpath("rldata").rglob("*.py"), *ROOT.joinpath("trainer").rglob("*.py")]:
        if path.name == "yaml_safe.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in loaders
                and isinstance(node.value, ast.Name)
                and node.value.id == "yaml"
            ):
                hits.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not hits, f"use rldata.configs.yaml_safe.safe_load: {hits}"
