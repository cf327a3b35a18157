"""Library errors: every parameter / config error is an RldataError naming its field (never a CLI
flag), and no user-facing code raises a bare builtin exception (an AST scan keeps that true)."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import polars as pl
import pytest

from rldata._remote import parse_storage_options
from rldata.adaptive import AdaptiveSpec
from rldata.configs.sampling import SampleConfig, SamplingSpec, VerifyConfig
from rldata.cost import CostSpec
from rldata.demo import DemoConfig
from rldata.errors import ConfigError, RldataError, UnknownNameError
from rldata.gym import GymError
from rldata.ingest.gym import gym_tasks
from rldata.jobs.verify import VerifyJob
from rldata.ledger.select import Band, parse_buckets, quantile_buckets
from rldata.schemas import get as table_schema
from rldata.stats import pass_at_k
from rldata.trainer.advantages import compute_advantages
from rldata.trainer.config import TrainConfig

BAND = Band(0.1, 0.9)


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: Band(0.9, 0.1), "band"),
        (lambda: Band(0.1, 1.5), "band"),
        (lambda: Band.parse("abc"), "band"),
        (lambda: AdaptiveSpec(rule="greedy", band=BAND), "rule"),
        (lambda: AdaptiveSpec(rule="sequential", alpha=0.7, band=BAND), "alpha"),
        (lambda: AdaptiveSpec(rule="exact", round_size=0, band=BAND), "round_size"),
        (lambda: AdaptiveSpec(rule="exact"), "band"),
        (lambda: AdaptiveSpec(rule="exact", band=BAND, min_n=0), "min_n"),
        (lambda: SamplingSpec(n=0), "n"),
        (lambda: SamplingSpec(temperature=-1.0), "temperature"),
        (lambda: SamplingSpec(top_p=0.0), "top_p"),
        (lambda: SamplingSpec(max_tokens=0), "max_tokens"),
        (lambda: TrainConfig(mode="async", max_staleness=0), "max_staleness"),
        (lambda: TrainConfig(n=1), "n"),
        (lambda: TrainConfig.from_dict({"learning_rate": 0.1}), "learning_rate"),
        (lambda: CostSpec(0.0), "tflops"),
        (lambda: CostSpec(989.0, 1.5), "mfu"),
        (lambda: CostSpec.from_gpu(None), "gpu"),
        (lambda: CostSpec.from_gpu("z80"), "gpu"),
        (lambda: VerifyJob(batch=0), "batch"),
        (lambda: VerifyJob(verify=VerifyConfig(timeout_s=0)), "timeout_s"),
        (lambda: SampleConfig(where="1=1", selection="s"), "selection"),
        (lambda: SampleConfig(batch_tasks=0), "batch_tasks"),
        (lambda: parse_buckets("nonsense"), "buckets"),
        (lambda: parse_buckets("easy:0.9-0.5"), "buckets"),
        (lambda: quantile_buckets(pl.Series([0.5]), 0), "quantiles"),
        (lambda: gym_tasks("chain_sum", 0), "n"),
        (lambda: gym_tasks("chain_sum", 2, seed="x"), "seed"),
        (lambda: parse_storage_options(["no-equals-sign"]), "storage_options"),
        (lambda: pass_at_k(4, 2, 9), "k"),
        (lambda: DemoConfig(steps=0), "steps"),
        (lambda: compute_advantages([[1.0, 0.0]], estimator="ppo"), "advantage"),
        (lambda: table_schema("nope"), "table"),
    ],
)
def test_parameter_errors_are_rldata_errors_naming_their_field(make, field):
    with pytest.raises(RldataError) as e:
        make()
    err = e.value
    assert err.field == field
    msg = str(err)
    assert field.split("_")[0].lower() in msg.lower(), msg  # the message names what is wrong...
    assert "--" not in msg, msg  # ...as the library calls it, not as a CLI flag
    # older callers caught ValueError (KeyError for a name): still true; GymError never was one
    assert isinstance(err, ValueError | KeyError | GymError)


def test_unknown_name_error_prints_its_message_unquoted():
    e = UnknownNameError("unknown table 'x'; tables: tasks", field="table")
    assert str(e) == "unknown table 'x'; tables: tasks" and isinstance(e, KeyError)


def test_trainer_config_error_is_a_config_error():
    with pytest.raises(ConfigError) as e:
        TrainConfig(lr=0)
    assert e.value.field == "lr" and str(e.value).startswith("lr: ") and e.value.reason.startswith("must be")
    assert type(e.value) is ConfigError  # one class: rldata.trainer.config re-exports it


def test_one_config_error_class_and_its_two_spellings():
    from rldata.trainer import config as trainer_config

    assert trainer_config.ConfigError is ConfigError
    for e in (ConfigError.of("lr", "must be > 0"), ConfigError("lr", "must be > 0")):  # the older form
        assert (str(e), e.field, e.reason) == ("lr: must be > 0", "lr", "must be > 0")
    e = ConfigError("batch must be >= 1, got 0", field="batch")
    assert (str(e), e.field, e.reason) == ("batch must be >= 1, got 0", "batch", "batch must be >= 1, got 0")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({}, "where"), ({"field": "eval_where"}, "eval_where"), ({"option": "--eval-where"}, "eval_where")],
)
def test_a_predicate_error_names_its_field(kwargs, field):
    from rldata.sql_guard import check_predicate

    check_predicate("t.x = 1 AND k.y IN (1, 2)", **kwargs)  # one predicate: fine
    for text, why in [
        ("1=1; COPY tasks TO 'x.csv'", "not a single SQL predicate"),
        ("((", "not a valid SQL"),
        (" ", "empty"),
    ]:
        with pytest.raises(RldataError) as e:
            check_predicate(text, **kwargs)
        assert e.value.field == field and str(e.value).startswith(field + " ") and why in str(e.value)


def test_statements_are_parsed_alike_in_every_thread():
    """The parse runs on one DuckDB connection per thread (a connection is not shared between
    threads): threads checking at once get the same verdicts as this one."""
    from concurrent.futures import ThreadPoolExecutor

    from rldata.sql_guard import check_read_only

    texts = [
        "SELECT 1",
        "SELECT 1; SELECT 2",
        "DROP TABLE tasks",
        "((",
        "WITH t AS (SELECT 1) SELECT * FROM t",
    ]

    def verdict(text: str) -> str:
        try:
            check_read_only(text)
            return "ok"
        except RldataError as e:
            return str(e).split(":")[0]

    here = [verdict(t) for t in texts]
    assert here[0] == "ok" and here[-1] == "ok" and len(set(here)) >= 3
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(verdict, texts * 20)) == here * 20


# ---- the rule stays true: no builtin exception raised where a user could see it -----------------
ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("rldata", "jobs", "trainer", "schemas")
_BUILTIN = {
    n
    for n in dir(builtins)
    if isinstance(getattr(builtins, n), type) and issubclass(getattr(builtins, n), BaseException)
}

# Anywhere: abstract methods.
ANYWHERE = {"NotImplementedError"}
# (file, exception): why a builtin is right there.  Each is caught by the code around it, or is an
# internal invariant (a bug if it fires), or runs outside the library (the sandbox's child).
ALLOWED = {
    ("rldata/envs/code_feedback.py", "ValueError"): "caught a line below and re-raised as RldataError",
    (
        "rldata/envs/calculator.py",
        "ValueError",
    ): "a bad env config: make_env re-raises it naming the environment",
    (
        "rldata/envs/reasoning_gym.py",
        "ValueError",
    ): "a bad env config: make_env re-raises it naming the environment",
    ("rldata/envs/guard.py", "TimeoutError"): "an env call's failure: becomes the env's error verdict",
    ("rldata/heavy.py", "AttributeError"): "a stand-in's __getattr__: Python's protocol for a missing name",
    ("rldata/envs/guard.py", "RuntimeError"): "an env call's failure: becomes the env's error verdict",
    (
        "rldata/store/validate.py",
        "TypeError",
    ): "a value of the wrong Python type passed to the API (a programming error)",
    ("rldata/sandbox/_boot.py", "OSError"): "runs in the sandbox's child process, not in the library",
    ("rldata/sandbox/_boot.py", "PermissionError"): "the sandbox's audit hook, inside the child process",
    ("rldata/verify/isolate.py", "EOFError"): "caught by the caller: the verifier process is restarted",
    ("rldata/verify/isolate.py", "RuntimeError"): "caught a line below: the verifier process is restarted",
    (
        "jobs/pretrain_tiny.py",
        "ValueError",
    ): "the tiny tokenizer's internal checks (the config raises ConfigError)",
    (
        "jobs/tiny_chat.py",
        "ValueError",
    ): "the chat model's training conversations: internal checks of the recipe's own generator",
    ("jobs/tiny_report.py", "ValueError"): "an internal invariant of a report record",
    ("trainer/advantages.py", "ValueError"): "reward-array invariants: the driver builds the array",
    ("trainer/checkpoint.py", "TypeError"): "an internal invariant: the driver writes only JSON values",
    ("trainer/writer.py", "RuntimeError"): "an internal invariant: the trainer submits only before close",
    ("trainer/pipeline.py", "ValueError"): "an internal invariant: steps are consumed in order",
    ("trainer/policy.py", "ValueError"): "batch-shape invariants: the learner builds the batch",
    ("rldata/interop/formats.py", "TypeError"): "a plugin passing a non-callable: a programming error",
    ("rldata/predict/__init__.py", "AttributeError"): "the module __getattr__ protocol for a missing name",
    (
        "rldata/rollout/render.py",
        "ValueError",
    ): "a chat template's raise_exception while probing it: caught a few lines below",
}


def _builtin_raises():
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=rel)):
                if not isinstance(node, ast.Raise) or node.exc is None:
                    continue
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(exc, ast.Name) and exc.id in _BUILTIN:
                    yield rel, node.lineno, exc.id


def test_no_builtin_exceptions_reach_a_user():
    found = list(_builtin_raises())
    assert found, "the scan found nothing at all: wrong root?"
    bad = [
        f"{rel}:{line}: raise {name}"
        for rel, line, name in found
        if name not in ANYWHERE and (rel, name) not in ALLOWED
    ]
    assert not bad, (
        "raise an rldata.errors class (ConfigError, InputError, UnknownNameError, ...) "
        "naming the field, or add a documented entry to ALLOWED:\n" + "\n".join(bad)
    )
