"""rldata.configs.fields: each parameter is declared once, as a config field, and the commands' options, the
API's keywords, --config files and docs/options.md all come from it; these tests tie them together."""

from __future__ import annotations

import dataclasses

import pytest
import typer

import rldata
from rldata import open_store
from rldata.cli import _load, app, main
from rldata.cli.options_docs import configs, docs_tables
from rldata.configs.fields import REQUIRED, as_flat, build, cli_leaves, leaves, load
from rldata.configs.sampling import SampleConfig, SamplingSpec
from rldata.errors import ConfigError, InputError
from rldata.interop.options import ExportConfig
from rldata.trainer.config import TrainCommand, TrainConfig

# Options that print the result rows or write them to a file (--out, the shared OUT_OPT, where the
# config has no `out` field of its own; ingest's --rejects), and --config itself: not parameters of
# the work
OUTPUT_OPTIONS = {"fmt", "help", "config_file", "out", "rejects", "as_json", "report"}


def _command(name: str):
    _load()
    cmd = typer.main.get_command(app)
    for word in name.split():  # "env profile": a subcommand
        cmd = cmd.commands[word]
    return cmd


@pytest.mark.parametrize("name", sorted(configs()))
def test_every_option_maps_to_exactly_one_field_with_the_same_default(name):
    cls = configs()[name]
    by_name = {leaf.name: leaf for leaf in leaves(cls)}
    seen = set()
    for p in _command(name).params:
        if p.name in OUTPUT_OPTIONS and p.name not in by_name:
            continue
        if p.param_type_name == "argument":  # a positional argument sets its file-only field
            leaf = by_name.get(p.name)
            assert leaf is not None and not leaf.meta.cli, f"rldata {name} {p.name}: no file-only field"
            assert p.default is None or p.default == leaf.default, (p.name, p.default, leaf.default)
            continue
        if "__deprecated_" in p.name:  # a hidden old flag: it feeds its field, and has no default
            field = p.name.split("__deprecated_")[0]
            assert field in by_name and p.default is None and p.hidden, p.name
            continue
        matches = [leaf for leaf in by_name.values() if leaf.name == p.name]
        assert len(matches) == 1, f"rldata {name} {p.opts}: no field, or more than one"
        leaf = matches[0]
        want = leaf.default if leaf.meta.from_field is None else leaf.meta.from_field(leaf.default)
        want = None if want is REQUIRED else want  # a required field is checked when the config is built
        assert p.default == (list(want) if isinstance(want, tuple) else want), (p.opts, p.default, want)
        assert leaf.flag in p.opts, (p.opts, leaf.flag)
        seen.add(p.name)
    # and every field meant for the command line has its option
    assert seen == {leaf.name for leaf in cli_leaves(cls)}


def test_the_commands_keep_their_flags():
    """The flags rldata sample and rldata train had before the options came from the fields."""
    sample = {o for p in _command("sample").params for o in p.opts}
    assert {
        "--n", "--model", "--where", "--selection", "--temperature", "--top-p", "--max-tokens", "--seed",
        "--address", "--engines", "--batch-tasks", "--max-model-len", "--env", "--reward-spec",
        "--adaptive", "--alpha", "--round", "--band", "--format", "-f",
    } <= sample  # fmt: skip
    train = {o for p in _command("train").params for o in p.opts}
    assert {
        "--curriculum", "-c", "--config", "--model", "--steps", "--learners", "--engines", "--out",
        "--resume", "--run-id", "--sampler", "--uniform", "--where", "--eval-heldout", "--eval-where",
        "--eval-every", "--eval-n", "--eval-size", "--eval-selection", "--eval-temperature", "--checkpoint-every", "--seed", "--address", "--max-model-len", "--env", "--async",
        "--max-staleness", "--reward-spec", "--tag", "--tracker", "--tracker-dir", "--format",
    } <= train  # fmt: skip


def test_docs_options_page_is_generated_from_the_fields():
    from rldata.cli.options_docs import DOCS

    assert DOCS.read_text() == docs_tables(), (
        "run: python -m rldata.cli.options_docs --docs > docs/options.md"
    )
    for cls in configs().values():
        for leaf in leaves(cls):
            assert leaf.meta.help, f"{cls.__name__}.{'.'.join(leaf.path)} has no help text"


def test_a_config_loads_flat_or_nested_and_overrides_win(tmp_path):
    nested = build(SampleConfig, {"sampling": {"n": 4, "temperature": 0.5}, "engine": {"engines": 2}})
    flat = build(SampleConfig, {"n": 4, "temperature": 0.5, "engines": 2})
    assert nested == flat and nested.sampling == SamplingSpec(n=4, temperature=0.5)
    assert build(SampleConfig, as_flat(nested)) == nested
    toml = tmp_path / "s.toml"
    toml.write_text("where = \"domain = 'math'\"\n[sampling]\nn = 8\nmax_tokens = 4\n")
    cfg = load(SampleConfig, toml, n=2)
    assert (cfg.sampling.n, cfg.sampling.max_tokens, cfg.where) == (2, 4, "domain = 'math'")
    with pytest.raises(ConfigError, match="unknown field; known fields: .*max_tokens"):
        build(SampleConfig, {"max_token": 3})


def test_a_sub_config_nests_at_any_depth_as_docs_trainer_shows(tmp_path):
    """docs/trainer.md's ``live: {decay: ..}`` in a train file: a section two levels down
    (train -> live) is read like a top-level one, bare or under its parent."""
    from rldata.trainer.config import TrainCommand

    path = tmp_path / "t.yaml"
    path.write_text("lr: 1.0e-4\nlive: {decay: 0.5, prior: flat}\n")
    bare = load(TrainCommand, path)
    assert (bare.train.live.decay, bare.train.live.prior, bare.train.lr) == (0.5, "flat", 1e-4)
    under = build(TrainCommand, {"train": {"lr": 1e-4, "live": {"decay": 0.5, "prior": "flat"}}})
    flat = build(TrainCommand, {"lr": 1e-4, "decay": 0.5, "prior": "flat"})
    assert bare == under == flat
    with pytest.raises(ConfigError, match="decy: unknown field"):
        build(TrainCommand, {"live": {"decy": 0.5}})


def test_a_bad_value_in_a_file_names_the_file_and_field(tmp_path):
    toml = tmp_path / "s.toml"
    toml.write_text("[engine]\nengines = 0\n")
    with pytest.raises(InputError) as e:
        load(SampleConfig, toml)
    assert e.value.field == "engines" and str(toml) in str(e.value)
    assert load(SampleConfig, toml, engines=3).engine.engines == 3  # an override replaces the bad value
    (tmp_path / "bad.toml").write_text("n = [\n")
    with pytest.raises(InputError, match="not valid TOML"):
        load(SampleConfig, tmp_path / "bad.toml")


def test_the_old_name_of_a_field_works_and_warns(capsys):
    cfg = TrainConfig.from_dict({"num_engines": 2})
    assert cfg.engines == 2 and cfg.num_engines == 2
    assert "num_engines is deprecated, use engines" in capsys.readouterr().err
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg and "engines" in cfg.to_dict()


def test_a_prefixed_section_is_nested_in_a_file_and_flat_on_the_command_line(tmp_path, capsys):
    """eval: {n: 8} in a file, --eval-n 8 on the command line; the flat eval_n (a file key or a
    Python keyword of the previous release) is a deprecated alias: same config, one warning line."""
    from rldata.cli._options import command

    new, old = tmp_path / "new.yaml", tmp_path / "old.yaml"
    new.write_text("eval: {n: 8, every: 5, heldout: true}\n")
    old.write_text("eval_n: 8\neval_every: 5\neval_heldout: true\n")
    cfg = load(TrainCommand, new)
    assert (cfg.train.eval.n, cfg.train.eval.every, cfg.train.eval.heldout) == (8, 5, True)
    assert capsys.readouterr().err == ""
    assert load(TrainCommand, old) == cfg
    assert capsys.readouterr().err.splitlines() == [
        f"rldata: warning: eval_{k} is deprecated, use eval.{k} (the old name goes in the next release)"
        for k in ("n", "every", "heldout")
    ]
    # the section's n is not the rollout's: each keeps its own value
    both = build(TrainCommand, {"eval": {"n": 3}, "group_size": 4})
    assert (both.train.eval.n, both.train.group_size) == (3, 4)

    # the command line: --eval-n sets eval.n and warns about nothing; it wins over the file
    app_ = typer.Typer()
    seen = []

    @app_.command()
    @command(TrainCommand)
    def cmd(config: TrainCommand):
        seen.append(config)

    from typer.testing import CliRunner

    res = CliRunner().invoke(app_, ["--config", str(new), "--eval-n", "2", "--eval-size", "7"])
    assert res.exit_code == 0, res.output
    assert (seen[-1].train.eval.n, seen[-1].train.eval.size, seen[-1].train.eval.every) == (2, 7, 5)
    assert "deprecated" not in res.output
    # a Python keyword of the old name reaches the same field (a bad value: the verb stops first)
    with pytest.raises(ConfigError) as e:
        rldata.train(tmp_path / "nowhere", eval_n=0)
    assert e.value.field == "eval.n" and str(e.value) == "eval.n: must be in [1, 100000], got 0"
    assert "eval_n is deprecated, use eval.n" in capsys.readouterr().err
    assert not (tmp_path / "nowhere").exists()
    # the docs table names the nested field and its alias
    assert "| `--eval-n` | `train.eval.n` | `16` | Samples per held-out task. (deprecated: `eval_n`) |" in (
        docs_tables()
    )


def test_the_verbs_take_the_fields_by_name(tmp_path):
    for verb in (rldata.sample, rldata.train):
        with pytest.raises(ConfigError, match="unknown field") as e:
            verb(tmp_path / "nowhere", temprature=0.5)
        assert e.value.field == "temprature"
    assert not (tmp_path / "nowhere").exists()


def test_train_file_values_and_options_merge_on_the_command_line(tmp_path, capsys):
    root = str(tmp_path / "s")
    cfg = tmp_path / "train.yaml"
    cfg.write_text("group_size: 1\nprompts_per_step: 4\n")
    # the option replaces the file's bad group_size; the run's own check then speaks
    code = main(["--store", root, "train", "--config", str(cfg), "--group-size", "4", "--uniform",
                 "--sampler", "mixture"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and "--uniform: uniform contradicts sampler 'mixture'" in err, err
    code = main(["--store", root, "train", "--config", str(cfg)])
    err = capsys.readouterr().err
    assert code == 1 and f"{cfg}: field 'group_size'" in err, err


def test_sample_reads_its_config_file_and_records_no_run_when_refused(tmp_path, capsys):
    root = tmp_path / "s"
    open_store(root).append("tasks", [{"task_id": "t", "source": "u", "domain": "math", "prompt": "1+1="}])
    cfg = tmp_path / "sample.yaml"
    cfg.write_text("where: \"domain = 'math'\"\nsampling:\n  n: 0\n")
    code = main(["--store", str(root), "sample", "--config", str(cfg)])
    err = capsys.readouterr().err
    assert code == 1 and str(cfg) in err and "field 'n'" in err, err
    code = main(["--store", str(root), "sample", "--config", str(cfg), "--n", "2", "--selection", "x"])
    err = capsys.readouterr().err
    assert code == 1 and "--selection: give where or selection, not both" in err, err
    assert open_store(root).sql("SELECT count(*) FROM runs").fetchall() == [(0,)]


def test_a_trainer_field_is_one_edit():
    """A new TrainConfig field reaches the CLI, the API, files and the docs with no other edit."""
    from rldata.cli._options import command
    from rldata.configs.fields import param

    @dataclasses.dataclass(frozen=True)
    class Grown(TrainConfig):
        sharding_plan: str = param("none", help="A field TrainConfig does not have yet.")

    assert [leaf.flag for leaf in cli_leaves(Grown)][-1] == "--sharding-plan"
    assert build(Grown, {"sharding_plan": "fsdp2"}).sharding_plan == "fsdp2"

    @command(Grown)
    def cmd(ctx: typer.Context, config: TrainConfig) -> None:  # (a local class is not resolvable)
        print(config.sharding_plan, config.steps)

    t = typer.Typer()
    t.command()(cmd)
    t.command("x")(lambda: None)
    from typer.testing import CliRunner

    res = CliRunner().invoke(t, ["cmd", "--sharding-plan", "fsdp2", "--steps", "3"])
    assert res.exit_code == 0 and res.output.split() == ["fsdp2", "3"], res.output


def test_a_hostile_predicate_is_refused_from_python_as_from_the_cli(tmp_path, capsys):
    root = tmp_path / "s"
    open_store(root).append("tasks", [{"task_id": "t", "source": "u", "domain": "math", "prompt": "1+1="}])
    bad = "1=1; COPY tasks TO 'x.csv'"
    for verb, field, kw, argv in [
        (rldata.verify, "where", {"where": bad}, ["verify", "--where", bad]),
        (rldata.train, "where", {"where": bad}, ["train", "--where", bad]),
        (rldata.train, "eval.where", {"eval": {"where": bad}}, ["train", "--eval-where", bad]),
    ]:
        with pytest.raises(ConfigError) as e:
            verb(root, **kw)
        assert e.value.field == field and "not a single SQL predicate" in str(e.value)
        assert main(["--store", str(root), *argv]) == 1
        flag = argv[1]
        assert capsys.readouterr().err == f"rldata: error: {flag}: {e.value}\n"
    assert not (tmp_path / "x.csv").exists()


def _recipe_module(tmp_path, monkeypatch, name: str, head: str, section: str, tail: str = ""):
    """docs/contributing.md's field of ``section``, pasted into a class of a fresh module (a module,
    so the config's annotations resolve)."""
    import importlib
    import textwrap

    from tests.plugin_helpers import recipe_blocks

    (field,) = recipe_blocks(section, "python")
    (tmp_path / f"{name}.py").write_text(head + textwrap.indent(field, "    ") + tail)
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module(name)


def test_a_sampling_parameter_is_one_edit(tmp_path, monkeypatch):
    """The recipe's SamplingSpec field reaches the options, the docs, files, vLLM and the stored
    params with no other edit (a subclass stands in for the edited SamplingSpec)."""
    from typer.testing import CliRunner
    from vllm import SamplingParams

    from rldata.cli._options import command
    from rldata.cli.options_docs import docs_table

    mod = _recipe_module(
        tmp_path, monkeypatch, "recipe_min_p",
        "from dataclasses import dataclass\n"
        "from rldata.configs.fields import finite_between, nested, param\n"
        "from rldata.configs.sampling import SampleConfig, SamplingSpec\n\n\n"
        "@dataclass(frozen=True)\nclass GrownSpec(SamplingSpec):\n",
        "Add a sampling parameter",
        "\n\n@dataclass(frozen=True)\nclass GrownSample(SampleConfig):\n    sampling: GrownSpec = nested(GrownSpec)\n",
    )  # fmt: skip

    @command(mod.GrownSample)
    def cmd(ctx: typer.Context, config: SampleConfig) -> None:
        print(config.sampling.min_p, config.sampling.n)

    t = typer.Typer()
    t.command()(cmd)
    t.command("x")(lambda: None)
    assert "--min-p" in CliRunner().invoke(t, ["cmd", "--help"]).output
    res = CliRunner().invoke(t, ["cmd", "--min-p", "0.05", "--n", "2"])
    assert res.exit_code == 0 and res.output.split() == ["0.05", "2"], res.output
    assert "| `--min-p` | `sampling.min_p` | `0.0` | Drop tokens" in docs_table(mod.GrownSample)
    cfg = load(mod.GrownSample, {"sampling": {"min_p": 0.05}})
    with pytest.raises(ConfigError) as e:
        load(mod.GrownSample, {"sampling": {"min_p": 2}})
    assert e.value.field == "min_p"
    spec = cfg.sampling
    assert SamplingParams(**spec.vllm_kwargs(), n=1, seed=0).min_p == 0.05
    import json

    assert json.loads(spec.to_json())["min_p"] == 0.05  # the params stored with every trajectory
    # at its default the field leaves the hash stored before it existed; set, it is a new distribution
    assert mod.GrownSpec().params_hash == SamplingSpec().params_hash != spec.params_hash


def test_an_export_format_option_is_one_place(store, tmp_path, monkeypatch, capsys):
    """The recipe's options field reaches -O, --help, a config file, the docs and the manifest."""
    import json

    from typer.testing import CliRunner

    from rldata.cli._options import command
    from rldata.interop import formats, lineage
    from rldata.interop.options import format_option_tables
    from tests.interop.test_contributing_export import _seed
    from tests.plugin_helpers import export_registries, saved

    mod = _recipe_module(
        tmp_path, monkeypatch, "recipe_trl_option",
        "from dataclasses import dataclass\n"
        "from rldata.configs.fields import param\n"
        "from rldata.interop.export import TrlOptions\n\n\n"
        "@dataclass(frozen=True)\nclass TrlWithSystem(TrlOptions):\n",
        "Add an export format option",
    )  # fmt: skip
    restore = saved(export_registries())
    try:
        trl = formats.get_format("trl")
        formats.register_format(dataclasses.replace(trl, options=mod.TrlWithSystem), replace=True)

        @command(ExportConfig)
        def cmd(ctx: typer.Context, config: ExportConfig) -> None:
            print(config.options)

        t = typer.Typer()
        t.command()(cmd)
        t.command("x")(lambda: None)
        text = " ".join(CliRunner().invoke(t, ["cmd", "--help"]).output.replace("│", " ").split())
        assert "trl: prompt_style, answer_column, shard_rows, system_prompt" in text, text
        assert "| `system_prompt` |  | A system message put before every prompt. |" in format_option_tables()
        _seed(store)
        cfg = tmp_path / "export.yaml"
        cfg.write_text("selection: band\nformat: trl\noptions:\n  system_prompt: Be brief\n")
        for argv in (
            ["-s", "band", "-f", "trl", "-O", "system_prompt=Be brief"],
            ["--config", str(cfg)],
        ):
            out = tmp_path / f"out{len(argv)}"
            code = main(["--store", str(store.root), "export", *argv, "-o", str(out)])
            assert code == 0, capsys.readouterr().err
            manifest = lineage.read_manifest(out)
            assert manifest["options"]["system_prompt"] == "Be brief", json.dumps(manifest["options"])
    finally:
        restore()
