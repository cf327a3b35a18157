"""rldata.configs.fields: each parameter is declared once, as a config field, and the commands' options, the
API's keywords, --config files and docs/options.md all come from it; these tests tie them together."""

from __future__ import annotations

import dataclasses
import functools
import subprocess
import sys
from typing import Any

import pytest
import typer

import rldata
from rldata import open_store
from rldata.cli import _load, app, main
from rldata.cli.options_docs import configs, docs_tables
from rldata.configs.fields import KEY, REQUIRED, as_flat, build, cli_leaves, config, leaves, load
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

    # a fresh interpreter: the test modules register verifiers of their own ("test-count"...) at
    # collection, and the choices the page lists are the registry's
    fresh = subprocess.run(
        [sys.executable, "-m", "rldata.cli.options_docs", "--docs"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert DOCS.read_text() == fresh, "run: python -m rldata.cli.options_docs --docs > docs/options.md"
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
    with pytest.raises(ConfigError, match="^max_token: unknown field; did you mean 'max_tokens'\\?$"):
        build(SampleConfig, {"max_token": 3})
    with pytest.raises(ConfigError, match="unknown field; known fields: .*max_tokens"):
        build(SampleConfig, {"flux_capacitor": 3})


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
    assert cfg.engine.engines == 2
    assert "num_engines is deprecated, use engines" in capsys.readouterr().err
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg and cfg.to_dict()["engine"]["engines"] == 2
    # the samples per prompt are n, as everywhere; the trainer's old group_size still sets them
    assert TrainConfig.from_dict({"group_size": 4}) == TrainConfig(n=4) == TrainConfig(group_size=4)
    assert TrainConfig(n=4).rollout.n == 4 and TrainConfig().rollout.n == 8
    err = capsys.readouterr().err.splitlines()
    assert (
        err
        == ["rldata: warning: group_size is deprecated, use n (the old name goes in the next release)"] * 2
    )


def test_a_prefixed_section_is_nested_in_a_file_and_flat_on_the_command_line(tmp_path, capsys):
    """eval: {n: 8} in a file, --eval-n 8 on the command line; the flat eval_n (a file key or a
    Python keyword of the previous release) is a deprecated alias: same config, one warning line."""
    from rldata.cli._options import command

    new, old = tmp_path / "new.yaml", tmp_path / "old.yaml"
    new.write_text("eval: {n: 8, every: 5, heldout: true}\n")
    old.write_text("eval_n: 8\neval_every: 5\neval_heldout: true\n")
    cfg = load(TrainCommand, new)
    assert (cfg.train.eval.sampling.n, cfg.train.eval.every, cfg.train.eval.heldout) == (8, 5, True)
    assert capsys.readouterr().err == ""
    assert load(TrainCommand, old) == cfg
    assert capsys.readouterr().err.splitlines() == [
        f"rldata: warning: eval_{k} is deprecated, use eval.{k} (the old name goes in the next release)"
        for k in ("n", "every", "heldout")
    ]
    # the section's n is not the rollout's: each keeps its own value
    both = build(TrainCommand, {"eval": {"n": 3}, "n": 4})
    assert (both.train.eval.sampling.n, both.train.rollout.n) == (3, 4)

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
    assert (seen[-1].train.eval.sampling.n, seen[-1].train.eval.size, seen[-1].train.eval.every) == (2, 7, 5)
    assert "deprecated" not in res.output
    # a Python keyword of the old name reaches the same field (a bad value: the verb stops first)
    with pytest.raises(ConfigError) as e:
        rldata.train(tmp_path / "nowhere", eval_n=0)
    assert e.value.field == "eval.n" and str(e.value) == "eval.n: must be at least 1, got 0"
    assert "eval_n is deprecated, use eval.n" in capsys.readouterr().err
    assert not (tmp_path / "nowhere").exists()
    # the docs table names the nested field and its alias
    assert "| `--eval-n` | `train.eval.sampling.n` | `16` | Samples per task" in docs_tables()
    assert "(deprecated: `eval_n`) |" in docs_tables()


def test_the_verbs_take_the_fields_by_name(tmp_path):
    for verb in (rldata.sample, rldata.train):
        with pytest.raises(ConfigError, match="unknown field") as e:
            verb(tmp_path / "nowhere", temprature=0.5)
        assert e.value.field == "temprature"
    assert not (tmp_path / "nowhere").exists()


def test_train_file_values_and_options_merge_on_the_command_line(tmp_path, capsys):
    root = str(tmp_path / "s")
    cfg = tmp_path / "train.yaml"
    cfg.write_text("n: 1\nprompts_per_step: 4\n")
    # the option replaces the file's bad n; the run's own check then speaks
    code = main(["--store", root, "train", "--config", str(cfg), "--n", "4", "--uniform",
                 "--sampler", "mixture"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and "--uniform: uniform contradicts sampler 'mixture' (rule: run_rules)" in err, err
    code = main(["--store", root, "train", "--config", str(cfg)])
    err = capsys.readouterr().err
    assert code == 1 and f"{cfg}: field 'n': must be >= 2" in err and "(rule: on_policy)" in err, err
    # the old name still works on the command line, with its one warning line
    code = main(["--store", root, "train", "--config", str(cfg), "--group-size", "4", "--uniform",
                 "--sampler", "mixture"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and "--group-size is deprecated, use --n" in err and "contradicts" in err, err
    # a typo in the file is named with the field it probably means (issue 45)
    cfg.write_text("prompt_per_step: 4\n")
    code = main(["--store", root, "train", "--config", str(cfg)])
    err = capsys.readouterr().err
    assert code == 1 and err.strip().endswith(
        f"{cfg}: field 'prompt_per_step': unknown field; did you mean 'prompts_per_step'?"
    ), err


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


def regrow(cls: type, old: type, new: type) -> type:
    """``cls`` with every section of class ``old`` (at any depth) nested as ``new`` instead: what
    editing ``old`` in place gives every config that nests it.  Generic: it knows no config, and
    keeps each nesting's own declaration (its defaults, old names, rule, follows)."""
    changed = {}
    for f in dataclasses.fields(cls):
        meta = f.metadata.get(KEY)
        if meta is None or meta.section is None:
            continue
        sub = new if meta.section is old else regrow(meta.section, old, new)
        if sub is not meta.section:
            changed[f.name] = (sub, dataclasses.replace(meta, section=sub))
    if not changed:
        return cls
    ns: dict = {"__annotations__": {}, "__module__": cls.__module__}
    for name, (sub, meta) in changed.items():
        factory = functools.partial(sub, **dict(meta.defaults)) if meta.defaults else sub
        ns["__annotations__"][name] = sub
        ns[name] = dataclasses.field(default_factory=factory, metadata={KEY: meta})
    return config(type(f"Grown{cls.__name__}", (cls,), ns))


def _cli(cls: type):
    """A one-command Typer app whose options come from ``cls``; its command prints the config."""
    from rldata.cli._options import command

    @command(cls)
    def cmd(ctx: typer.Context, config: Any) -> None:
        seen.append(config)

    seen: list = []
    t = typer.Typer()
    t.command()(cmd)
    t.command("x")(lambda: None)
    return t, seen


def test_a_sampling_parameter_is_one_edit(tmp_path, monkeypatch):
    """The recipe's SamplingSpec field reaches the options, the docs, files, vLLM and the stored
    params of `rldata sample`, and a train run's rollouts and evaluations, with no other edit (a
    subclass stands in for the edited SamplingSpec; regrow nests it wherever SamplingSpec is)."""
    from typer.testing import CliRunner
    from vllm import SamplingParams

    from rldata.cli.options_docs import docs_table
    from rldata.trainer.evaluate import eval_job

    mod = _recipe_module(
        tmp_path, monkeypatch, "recipe_min_p",
        "from dataclasses import dataclass\n"
        "from rldata.configs.fields import finite_between, nested, param\n"
        "from rldata.configs.sampling import SampleConfig, SamplingSpec\n\n\n"
        "@dataclass(frozen=True)\nclass GrownSpec(SamplingSpec):\n",
        "Add a sampling parameter",
    )  # fmt: skip
    sample_cls = regrow(SampleConfig, SamplingSpec, mod.GrownSpec)
    t, seen = _cli(sample_cls)
    assert "--min-p" in CliRunner().invoke(t, ["cmd", "--help"]).output
    res = CliRunner().invoke(t, ["cmd", "--min-p", "0.05", "--n", "2"])
    assert res.exit_code == 0 and (seen[-1].sampling.min_p, seen[-1].sampling.n) == (0.05, 2), res.output
    assert "| `--min-p` | `sampling.min_p` | `0.0` | Drop tokens" in docs_table(sample_cls)
    cfg = load(sample_cls, {"sampling": {"min_p": 0.05}})
    with pytest.raises(ConfigError) as e:
        load(sample_cls, {"sampling": {"min_p": 2}})
    assert e.value.field == "min_p"
    spec = cfg.sampling
    assert SamplingParams(**spec.vllm_kwargs(), n=1, seed=0).min_p == 0.05
    import json

    assert json.loads(spec.to_json())["min_p"] == 0.05  # the params stored with every trajectory
    # at its default the field leaves the hash stored before it existed; set, it is a new distribution
    assert mod.GrownSpec().params_hash == SamplingSpec().params_hash != spec.params_hash

    # rldata train: the rollout's field and the eval's, on the command line, in a file and the docs
    train_cls = regrow(TrainCommand, SamplingSpec, mod.GrownSpec)
    t, seen = _cli(train_cls)
    help_text = CliRunner().invoke(t, ["cmd", "--help"]).output
    assert "--min-p" in help_text and "--eval-min-p" in help_text
    table = docs_table(train_cls)
    assert "| `--min-p` | `train.rollout.min_p` | `0.0` | Drop tokens" in table
    assert "| `--eval-min-p` | `train.eval.sampling.min_p` | the rollout's | Drop tokens" in table
    # the rollout: at its default it reaches the engine as vLLM's own default (the trainer's
    # rollouts pass cfg.rollout to the engines); set, the on-policy rule refuses it for training
    train = load(train_cls, {}).train
    assert SamplingParams(**train.rollout.vllm_kwargs(), n=1, seed=0).min_p == 0.0
    with pytest.raises(ConfigError) as e:
        load(train_cls, {"min_p": 0.05})
    assert e.value.field == "min_p" and "(rule: on_policy)" in str(e.value)
    # the evaluation: its own value, from the command line, reaches the eval's sample job and vLLM
    res = CliRunner().invoke(t, ["cmd", "--eval-min-p", "0.05", "--eval-heldout"])
    assert res.exit_code == 0, res.output
    job = eval_job(seen[-1].train, "some/checkpoint", ["t1"])
    assert job.sampling.min_p == 0.05 and job.sampling.n == 16  # the eval's own n, its min_p
    assert SamplingParams(**job.sampling.vllm_kwargs(), n=1, seed=0).min_p == 0.05
    assert load(train_cls, {"eval": {"min_p": 0.05}}).train.eval_spec().min_p == 0.05


def test_a_trainer_run_option_is_one_edit(tmp_path, monkeypatch):
    """The recipe's TrainRun field reaches `rldata train`'s options, its files, the docs, the verb's
    keywords and the run's stored args with no other edit."""
    from typer.testing import CliRunner

    from rldata.cli.options_docs import docs_table
    from rldata.trainer.config import TrainRun
    from rldata.trainer.driver import run_args
    from rldata.trainer.state import RunState, TrainSummary

    mod = _recipe_module(
        tmp_path, monkeypatch, "recipe_run_option",
        "from rldata.configs.fields import config, param\n"
        "from rldata.trainer.config import TrainRun\n\n\n"
        "@config\nclass GrownRun(TrainRun):\n",
        "Add a trainer run option",
    )  # fmt: skip
    cls = regrow(TrainCommand, TrainRun, mod.GrownRun)
    t, seen = _cli(cls)
    assert "--profile-dir" in CliRunner().invoke(t, ["cmd", "--help"]).output
    res = CliRunner().invoke(t, ["cmd", "--profile-dir", "prof", "--steps", "3"])
    assert res.exit_code == 0 and seen[-1].run.profile_dir == "prof" and seen[-1].train.steps == 3
    assert "| `--profile-dir` | `run.profile_dir` |  | Write a torch profiler" in docs_table(cls)
    path = tmp_path / "train.yaml"
    path.write_text("run: {profile_dir: p2}\nsteps: 2\n")
    cmd = load(cls, path)
    assert cmd.run.profile_dir == "p2" and load(cls, None, profile_dir="p3").run.profile_dir == "p3"
    state = RunState("r", None, tmp_path, None, None, {}, [], {}, TrainSummary("r", "m"))
    state.base = type("Base", (), {"path": "m"})()
    assert run_args(cmd.train, cmd.run, state)["run"]["profile_dir"] == "p2"  # the runs row records it


def test_an_env_spec_field_is_one_edit(tmp_path, monkeypatch):
    """The recipe's EpisodeConfig field is a key of spec files, an option of `rldata env register`, a
    row of the docs, part of the JSON (and version) of a spec that sets it only, and a keyword a class
    takes by naming it in spec_fields."""
    from typer.testing import CliRunner

    from rldata.cli.options_docs import docs_table
    from rldata.envs import base
    from rldata.envs.registration import EnvRegisterConfig

    mod = _recipe_module(
        tmp_path, monkeypatch, "recipe_env_field",
        "from rldata.configs.fields import config, param\n"
        "from rldata.envs.base import EpisodeConfig, _positive_int\n\n\n"
        "@config\nclass GrownEpisode(EpisodeConfig):\n",
        "Add an environment spec field",
    )  # fmt: skip
    spec_cls = regrow(base.EnvSpec, base.EpisodeConfig, mod.GrownEpisode)
    register_cls = regrow(EnvRegisterConfig, base.EpisodeConfig, mod.GrownEpisode)
    t, seen = _cli(register_cls)
    assert "--max-tool-calls" in CliRunner().invoke(t, ["cmd", "--help"]).output
    (tmp_path / "reg.yaml").write_text("spec: vf\n")  # the NAME argument of the real command
    res = CliRunner().invoke(
        t,
        ["cmd", "--max-tool-calls", "4", "--openenv", "http://127.0.0.1:9", "--config-file", str(tmp_path / "reg.yaml")],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert seen[-1].spec_data()["max_tool_calls"] == 4  # the spec an OpenEnv registration stores
    assert "| `--max-tool-calls` | `episode.max_tool_calls` | `16` | Tool calls per episode" in (
        docs_table(register_cls)
    )
    # a spec file's key; the JSON (so the version) of a spec that leaves it at its default is unchanged
    plain = base.EnvSpec.from_dict({"env": "calculator", "max_turns": 3})
    grown = spec_cls.from_dict({"env": "calculator", "max_turns": 3})
    assert grown.to_json() == plain.to_json()
    set_ = spec_cls.from_dict({"env": "calculator", "max_tool_calls": 2})
    assert set_.episode.max_tool_calls == 2 and '"max_tool_calls": 2' in set_.to_json()
    with pytest.raises(ConfigError, match="max_tool_calls: expected a positive integer"):
        build(spec_cls, {"env": "calculator", "max_tool_calls": 0})
    # a class names it in spec_fields and gets it (make_env passes the episode's fields it names)
    monkeypatch.setattr(base, "_PASSABLE", (*base._PASSABLE, "max_tool_calls"))  # derived at import

    class Counting(base.BaseEnv):
        name, version = "counting", "1"
        spec_fields = ("max_tool_calls",)

        def __init__(self, max_tool_calls, **kw):
            super().__init__(**kw)
            self.max_tool_calls = max_tool_calls

    monkeypatch.setitem(base.REGISTRY, "counting", Counting)
    env = base.make_env(spec_cls.from_dict({"env": "counting", "max_tool_calls": 5}))
    assert env.max_tool_calls == 5
    assert base._PASSABLE[:-1] == tuple(
        f.name for f in dataclasses.fields(base.EpisodeConfig) if f.name != "system_prompt"
    )


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


# Dataclasses that share fields (and their defaults) with a config on purpose, each with why; a
# shadow config gets no entry: the job takes its config itself (issue 39).
RESTATED_ON_PURPOSE = {
    "rldata.adaptive.rules.AdaptiveSpec": "the adaptive package's parsed stopping rule (a Band, min_n, "
    "trim), which rldata.jobs.sample.plan_sample builds from SampleConfig's adaptive, alpha, round and "
    "band; its simulations build it directly",
}


def _modules():
    import importlib
    import pkgutil

    import rldata.jobs
    import rldata.trainer

    for pkg in (rldata, rldata.jobs, rldata.trainer):
        for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            if m.name.endswith(("__main__", "sandbox._harness")):  # a script, the sandbox's child
                continue
            yield importlib.import_module(m.name)


def _is_config(cls: type) -> bool:
    return any(KEY in f.metadata for f in dataclasses.fields(cls))


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING


def _restated(cls: type, configs: list[type]) -> list[tuple[str, list[str]]]:
    """(config, fields) for every config three or more of whose fields ``cls`` declares again with
    the same default: a shadow of it."""
    out = []
    mine = {f.name: _default(f) for f in dataclasses.fields(cls)}
    for c in configs:
        theirs = {}
        for leaf in leaves(c):
            theirs.setdefault(leaf.path[-1], leaf.default)
        same = sorted(
            k
            for k, v in mine.items()
            if k in theirs and v is not dataclasses.MISSING and type(v) is type(theirs[k]) and v == theirs[k]
        )
        if len(same) >= 3:
            out.append((c.__name__, same))
    return out


def test_no_config_field_is_restated_by_another_class():
    """Every dataclass of rldata (the jobs' and verbs' own included) against every config class: a
    class declaring three or more of a config's fields again, with their defaults, is a shadow of
    it (SampleJob, DriverOptions, ExportSpec, ImportSpec and the old EnvSpec were); the job takes
    the config itself."""
    classes = {
        f"{v.__module__}.{v.__qualname__}": v
        for mod in _modules()
        for v in vars(mod).values()
        if isinstance(v, type) and dataclasses.is_dataclass(v) and v.__module__.startswith("rldata")
    }
    configs = [c for c in classes.values() if _is_config(c)]
    assert {"SampleConfig", "TrainConfig", "TrainRun", "ExportConfig", "EnvSpec"} <= {
        c.__name__ for c in configs
    }

    @dataclasses.dataclass(frozen=True)
    class ShadowJob:  # what a shadow looks like: the detector must see it
        model: str | None = None
        where: str | None = None
        batch_tasks: int = 128

    assert _restated(ShadowJob, configs) == [("SampleConfig", ["batch_tasks", "model", "where"])]
    found = {
        name: _restated(cls, configs)
        for name, cls in classes.items()
        if not _is_config(cls) and _restated(cls, configs)
    }
    assert set(found) == set(RESTATED_ON_PURPOSE), found


def test_each_nested_field_has_one_option_and_one_docs_row():
    """The nested parts (the rollout's and the eval's sampling, the engines, the episode) are
    options and docs rows like any field: each leaf exactly once in its command's table."""
    from rldata.cli.options_docs import docs_table

    for name, cls in configs().items():
        rows = docs_table(cls).splitlines()[2:]
        paths = [r.split(" | ")[1].strip("`") for r in rows]
        assert sorted(paths) == sorted(".".join(leaf.path) for leaf in leaves(cls)), name
        assert len(set(paths)) == len(paths), name
    train = {".".join(leaf.path) for leaf in leaves(TrainCommand)}
    assert {"train.rollout.n", "train.engine.model", "train.eval.sampling.max_tokens"} <= train
