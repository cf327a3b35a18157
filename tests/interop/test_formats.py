"""The export format registry: one record per format, the CLI's choices and help generated from it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from rldata.cli import main
from rldata.errors import RldataError
from rldata.interop import ExportConfig, formats
from rldata.interop.export import FORMATS
from rldata.interop.formats import (
    ExportFormat,
    UnknownFormat,
    format_names,
    get_format,
    option_names,
    register_format,
)
from tests.plugin_helpers import export_registries, saved


@pytest.fixture
def registry():
    restore = saved(export_registries())
    yield formats._REGISTRY
    restore()


def test_builtin_formats_are_records_in_their_namespaces():
    assert FORMATS == ("verl", "trl", "openrlhf", "hf", "jsonl")
    assert format_names("selection", plugins=False) == list(FORMATS)
    assert format_names("rollouts", plugins=False) == ["jsonl", "hf", "trl", "verl"]
    assert format_names("preferences", plugins=False) == ["jsonl", "parquet"]
    verl = get_format("verl")
    assert option_names(verl) == ("data_source", "env") and verl.prepare is not None and verl.help
    assert get_format("hf", "rollouts").write is get_format("hf").write  # one writer, shared
    with pytest.raises(UnknownFormat, match="unknown export format 'openrlhf' for conversations"):
        get_format("openrlhf", "rollouts")
    with pytest.raises(ValueError, match="namespace must be one of"):
        ExportFormat("x", write=formats.write_jsonl, namespace="nowhere")


def test_register_as_a_call_or_a_decorator_and_refuse_a_second_of_a_name(registry):
    rec = register_format(ExportFormat("toy-call", write=formats.write_jsonl))
    assert (
        get_format("toy-call") is rec
        and ExportConfig(out="out", selection="s", format="toy-call").format == "toy-call"
    )

    @dataclass(frozen=True)
    class ToyOptions:
        level: int = 1

    @register_format(name="toy-deco", write=formats.write_parquet, options=ToyOptions, help="h")
    def build(frame, spec):
        return frame

    assert get_format("toy-deco").build is build and option_names(get_format("toy-deco")) == ("level",)
    assert ExportConfig(
        out="out", selection="s", format="toy-deco", options={"level": "3"}
    ).opts == ToyOptions(3)  # parsed as declared
    assert register_format(rec) is rec  # the same record again is fine (a module imported twice)
    with pytest.raises(RldataError, match="already registered"):
        register_format(ExportFormat("toy-call", write=formats.write_parquet))
    register_format(ExportFormat("toy-call", write=formats.write_parquet), replace=True)
    assert get_format("toy-call").write is formats.write_parquet
    with pytest.raises(
        ValueError, match="unknown export format 'csv'; choices: verl, trl, openrlhf, hf, jsonl, toy-call"
    ):
        ExportConfig(out="out", selection="s", format="csv")


def test_cli_help_and_errors_come_from_the_registry(capsys):
    assert main(["export", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.replace("│", " ").split())  # rich draws a box around options
    for ns in ("selection", "rollouts"):
        for name in format_names(ns, plugins=False):
            assert name in text
    # the built-ins in registry order (a format another test registered may follow them: the CLI's
    # help is built once per process, when the app first loads)
    assert (
        "Layout: verl, trl, openrlhf, hf, jsonl" in text and "with --rollouts: jsonl, hf, trl, verl." in text
    )
    code = main(["export", "--selection", "s", "--format", "csv", "--out", "x"])
    err = capsys.readouterr().err
    assert code == 2 and "unknown export format 'csv'; choices: verl, trl, openrlhf, hf, jsonl" in err
