"""Every fenced code block of README.md and docs/*.md, checked against the code (issue 45).

The rules (docs/contributing.md, "Code blocks in the docs", says the same for writers):

- **Commands.** In a block tagged ``bash``, ``sh``, ``shell``, ``console`` or untagged, each line
  (``\\`` continuations joined, ``# comments`` and a leading ``$`` dropped) is split at ``|``,
  ``&&``, ``||`` and ``;``; a piece whose command (after ``VAR=value`` prefixes, or after the ``--``
  of a launcher such as ``ray job submit ... --``) is ``rldata`` is parsed by the real CLI, the
  click command of the Typer app: the group's options, each subcommand, each option's name, its
  value's presence, its type and its choices (a config field's own check included).  Nothing
  runs: the commands and the option callbacks are not called.  Diagrams and output go in ``text``
  blocks, which are not read.
  Tolerated, and only this: a value written as a placeholder (``<head-ip>``, an upper-case metavar
  such as ``RUN`` or ``N``) that is not of the option's type, never for a choice.  A ``...`` token
  (the rest of an example's options) is dropped; the line must still parse without it.
- **Prose.** Each inline code span ``rldata ...`` outside the blocks names a real command and real
  options (values, arguments and required options may be left out, as prose mentions them).
- **Synopses.** A line with bracketed optional parts (``[--seed N]``) is a synopsis: brackets are
  dropped, ``...`` (repeat) tokens are dropped, and ``a|b|c`` alternatives are parsed one by one
  (variant k takes every group's k-th alternative), so each choice listed must be a real one.
- **Python.** Every ``python`` block compiles, has no undefined name and no other pyflakes error
  (ruff's ``F`` rules but F401 unused import and F841 unused variable: a page may import a name to
  say where it lives), and each ``import rldata...`` / ``from rldata... import X`` resolves in the
  real package.  Then the blocks run, one after another in one fresh interpreter (imports paid
  once), each in its own namespace and its own empty directory.
- **Markers**, an HTML comment on the line before the fence (keep them few, each with its reason):
  ``<!-- docs-test: continues -->`` the block goes on from the page's previous python block
  (checked and run together); ``<!-- docs-test: in MODULE -->`` the block is a line of MODULE's
  source (a field inside a class): its free names must be MODULE's own, and it does not run;
  ``<!-- docs-test: no-run: REASON -->`` checked but not run (a model, Ray, a store with data).
"""

from __future__ import annotations

import ast
import functools
import importlib
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import typer
from ruff.__main__ import find_ruff_bin
from typer._click import exceptions as click_exc  # typer >= 0.20 vendors click

import rldata.cli
from rldata.cli._options import config_of
from rldata.configs.fields import cli_leaves
from rldata.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = {"", "bash", "sh", "shell", "console"}
MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<key>[a-z-]+)(?::?\s*(?P<arg>.*?))?\s*-->\s*$")
MARKERS = {"continues", "in", "no-run"}
RUN_TIMEOUT_S = 120


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the block's first body line
    info: str  # the fence's language tag ("" when untagged)
    text: str  # the body, dedented
    markers: tuple[tuple[str, str], ...] = ()

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    def marker(self, key: str) -> str | None:
        return next((arg for k, arg in self.markers if k == key), None)


def read_blocks(page: Path, text: str | None = None) -> list[Block]:
    """The fenced blocks of a markdown page, with the docs-test markers just above each fence."""
    lines = (page.read_text() if text is None else text).splitlines()
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)", lines[i])
        if not m:
            i += 1
            continue
        fence, start = m.group(2), i
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        markers, j = [], start - 1
        while j >= 0 and (mk := MARKER.match(lines[j])):
            markers.insert(0, (mk.group("key"), (mk.group("arg") or "").strip()))
            j -= 1
        out.append(Block(page, start + 2, m.group(3), textwrap.dedent("\n".join(body)), tuple(markers)))
        i += 1
    return out


def all_blocks() -> list[Block]:
    return [b for page in PAGES for b in read_blocks(page)]


# ---------------------------------------------------------------------------------------- commands


def command_lines(block: Block) -> list[tuple[int, str]]:
    """(line number, logical line) of a shell block: continuations joined."""
    out, pending, first = [], "", 0
    for k, raw in enumerate(block.text.splitlines()):
        if not pending:
            first = block.line + k
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        out.append((first, pending + raw))
        pending = ""
    if pending:
        out.append((first, pending))
    return out


_SEPARATORS = {"|", "||", "&&", ";", "&"}
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _is_synopsis(line: str) -> bool:
    return bool(re.search(r"(^|\s)\[-", line))


def rldata_argvs(line: str) -> list[list[str]]:
    """The argv (after ``rldata``) of every rldata command of a logical shell line; a synopsis gives
    one argv per alternative (``exact|sequential``: two)."""
    line = re.sub(r"^\s*\$\s+", "", line)
    synopsis = _is_synopsis(line)
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError:  # an unbalanced quote: a shell would wait for more
        if "rldata" in line.split():
            raise
        return []  # prose in a block, not a command
    segments, cur = [], []
    for tok in tokens:
        if tok in _SEPARATORS:
            if not (synopsis and tok == "|"):  # in a synopsis, `A | B` is an alternative
                segments.append(cur)
                cur = []
            continue
        cur.append(tok)
    segments.append(cur)
    out = []
    for seg in segments:
        while seg and _ASSIGN.match(seg[0]):
            seg = seg[1:]
        if seg[:1] != ["rldata"]:
            if "--" in seg and seg[seg.index("--") + 1 : seg.index("--") + 2] == ["rldata"]:
                seg = seg[seg.index("--") + 1 :]
            else:
                continue
        argv = seg[1:]
        if synopsis:
            argv = [t.lstrip("[").rstrip("]") for t in argv]
        argv = [t for t in argv if t and t != "..."]
        if not synopsis:
            out.append(argv)
            continue
        alts = [t.split("|") if "|" in t else [t] for t in argv]
        for k in range(max(len(a) for a in alts) if alts else 1):
            out.append([a[min(k, len(a) - 1)] for a in alts])
    return out


_PLACEHOLDER = re.compile(r"<[^>]+>|\.\.\.|^[A-Z][A-Z0-9_]*([=:,@.-][A-Z0-9_]*)*$")


def _placeholder(value) -> bool:
    values = value if isinstance(value, list | tuple) else [value]
    return any(isinstance(v, str) and _PLACEHOLDER.search(v) for v in values)


@functools.cache
def _cli():
    rldata.cli._load()
    return typer.main.get_command(rldata.cli.app)


def parse_problems(argv: list[str]) -> list[str]:
    """Why ``rldata ARGV`` would be refused by the CLI's parser (empty: it parses).  Walks the
    command tree as click does, without calling any command or option callback."""
    cmd, name, parent, args, problems = _cli(), "rldata", None, list(argv), []
    while True:
        extra = {"resilient_parsing": False, **cmd.context_settings}
        ctx = cmd.context_class(cmd, info_name=name, parent=parent, **extra)
        try:
            opts, rest, _ = cmd.make_parser(ctx).parse_args(args=list(args))
        except click_exc.UsageError as e:  # an unknown option, an option without its value
            return [*problems, f"{name}: {e.format_message()}"]
        cls = config_of(cmd)
        fields = {leaf.name: leaf for leaf in cli_leaves(cls)} if cls is not None else {}
        for param in cmd.get_params(ctx):
            if param.name in ("help", "version"):
                continue
            value, source = param.consume_value(ctx, opts)
            leaf = None
            try:
                coerced = value
                if value is not None:
                    coerced = param.get_runtime_param().coerce(value, param=param, ctx=ctx)
                if param.required and param.value_is_missing(coerced):
                    raise click_exc.MissingParameter(ctx=ctx, param=param)
                leaf = fields.get(param.name)
                if leaf is not None and coerced is not None and source.name == "COMMANDLINE":
                    field = coerced if leaf.meta.to_field is None else leaf.meta.to_field(coerced)
                    why = leaf.meta.problem(field)  # the config field's own check, as the command runs it
                    if why:
                        raise click_exc.BadParameter(why, ctx=ctx, param=param)
            except (click_exc.BadParameter, ConfigError) as e:
                msg = e.format_message() if isinstance(e, click_exc.UsageError) else str(e)
                choice = bool(getattr(param.type_descriptor, "is_choice", False))
                choice = choice or (leaf is not None and leaf.meta.choices is not None and leaf.meta.strict)
                if _placeholder(value) and not choice:
                    continue  # `--run RUN`: the reader puts a real value there
                problems.append(f"{name}: {msg}")
        if not isinstance(cmd, typer.core.TyperGroup):
            if rest and not ctx.allow_extra_args:
                problems.append(f"{name}: unexpected extra argument(s) {' '.join(rest)}")
            return problems
        if not rest:
            return [*problems, f"{name}: a subcommand is missing"]
        sub = cmd.get_command(ctx, rest[0])
        if sub is None:
            return [*problems, f"{name}: no such command {rest[0]!r}"]
        cmd, name, parent, args = sub, f"{name} {rest[0]}", ctx, rest[1:]


def command_problems(block: Block) -> list[str]:
    if block.info not in SHELL:
        return []
    out = []
    for line_no, line in command_lines(block):
        try:
            problems = [p for argv in rldata_argvs(line) for p in parse_problems(argv)]
        except ValueError as e:
            problems = [f"the shell cannot read it: {e}"]
        out += [f"{block.page.relative_to(ROOT)}:{line_no}: `{line.strip()}`: {p}" for p in problems]
    return out


# ------------------------------------------------------------------------------------------ python


def python_sources(blocks: list[Block]) -> list[tuple[Block, str, int]]:
    """(block, code to check, offset of the block's first line in it): a ``continues`` block is
    checked after the page's previous python block."""
    out, prev = [], {}
    for b in blocks:
        if b.info != "python":
            continue
        code, offset = b.text, 0
        if b.marker("continues") is not None:
            before = prev.get(b.page)
            assert before is not None, f"{b.where}: `continues` but no python block before it on the page"
            code, offset = before + "\n" + b.text, before.count("\n") + 1
        prev[b.page] = code
        out.append((b, code, offset))
    return out


def pyflakes_problems(sources: list[tuple[Block, str, int]], tmp: Path) -> list[str]:
    """ruff's pyflakes rules on each source, one ruff run for all; in-MODULE fragments may use the
    module's own names."""
    files = {}
    for k, (b, code, _) in enumerate(sources):
        f = tmp / f"block_{k}.py"
        f.write_text(code + "\n")
        files[f.name] = k
    cmd = [find_ruff_bin(), "check", "--isolated", "--no-cache", "--output-format", "json"]
    cmd += ["--select", "F", "--ignore", "F401,F841", "--target-version", "py311", *sorted(files)]
    r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode in (0, 1), r.stderr
    out = []
    for d in json.loads(r.stdout):
        b, _, offset = sources[files[Path(d["filename"]).name]]
        row = d["location"]["row"] - offset
        if row < 1:
            continue  # reported on the previous block, which is checked on its own
        module = b.marker("in")
        name = re.search(r"`([^`]+)`", d["message"])
        if module and d["code"] == "F821" and name and hasattr(importlib.import_module(module), name[1]):
            continue
        out.append(f"{b.page.relative_to(ROOT)}:{b.line + row - 1}: {d['code']} {d['message']}")
    return out


def compile_problems(b: Block, code: str) -> list[str]:
    try:
        compile(code, b.where, "exec")
    except SyntaxError as e:
        return [f"{b.where}: does not compile: {e}"]
    return []


def import_problems(b: Block, code: str) -> list[str]:
    """Each rldata import of the block resolves: the module imports, each name is in it."""
    out = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            mods = [(a.name, None) for a in node.names if a.name.split(".")[0] == "rldata"]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] == "rldata"
        ):
            mods = [(node.module, a.name) for a in node.names]
        else:
            continue
        for mod, name in mods:
            try:
                m = importlib.import_module(mod)
            except ImportError as e:
                out.append(f"{b.where}: `{mod}` does not import: {e}")
                continue
            if name is not None and name != "*" and not hasattr(m, name):
                try:
                    importlib.import_module(f"{mod}.{name}")
                except ImportError:
                    out.append(f"{b.where}: `from {mod} import {name}`: {mod} has no {name}")
    return out


def runnable(sources: list[tuple[Block, str, int]]) -> list[tuple[Block, str]]:
    """The blocks that run: neither in-MODULE lines nor no-run ones; a continuation runs (as the
    whole) when the block it continues would."""
    out, runs = [], {}
    for b, code, _ in sources:
        run = b.marker("no-run") is None and b.marker("in") is None
        if b.marker("continues") is not None:
            run = run and runs.get(b.page, False)
            out = [(ob, oc) for ob, oc in out if not (run and ob.page == b.page and code.startswith(oc))]
        runs[b.page] = run
        if run:
            out.append((b, code))
    return out


_RUNNER = """
import json, os, sys, traceback
for where, code, cwd in json.load(open(sys.argv[1])):
    os.chdir(cwd)
    print("START", where, flush=True)
    try:
        exec(compile(code, where, "exec"), {"__name__": "__main__"})
    except BaseException:
        print("FAILED", json.dumps([where, traceback.format_exc(limit=-3)]), flush=True)
"""


def run_problems(blocks: list[tuple[Block, str]], tmp: Path) -> list[str]:
    """Run the blocks in one fresh interpreter (the imports are paid once), one after another, each
    in its own namespace and its own empty directory; a block's failure does not stop the others."""
    plan = []
    for k, (b, code) in enumerate(blocks):
        d = tmp / f"run_{k}"
        d.mkdir()
        plan.append((b.where, code, str(d)))
    (tmp / "plan.json").write_text(json.dumps(plan))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RLDATA_QUIET": "1"}
    env.pop("RLDATA_STORE", None)
    cmd = [sys.executable, "-c", _RUNNER, str(tmp / "plan.json")]
    try:
        r = subprocess.run(
            cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout or ""
        started = re.findall(r"^START (.*)$", out, re.MULTILINE)
        last = started[-1] if started else "the interpreter"
        return [f"{last}: still running after {RUN_TIMEOUT_S} s (mark it no-run, with the reason)"]
    out = [
        f"{where}: raised:\n{tb}"
        for where, tb in map(json.loads, re.findall(r"^FAILED (.*)$", r.stdout, re.MULTILINE))
    ]
    if r.returncode != 0 or len(re.findall(r"^START ", r.stdout, re.MULTILINE)) != len(plan):
        out.append(f"the runner exited {r.returncode}:\n{r.stdout[-1000:]}\n{r.stderr[-2000:]}")
    return out


# ------------------------------------------------------------------------------------------- tests


def test_the_pages_have_blocks_and_markers_are_known():
    blocks = all_blocks()
    assert len(blocks) > 50
    for b in blocks:
        for key, arg in b.markers:
            assert key in MARKERS, f"{b.where}: unknown docs-test marker {key!r} (known: {sorted(MARKERS)})"
            if key in ("in", "no-run"):
                assert arg, f"{b.where}: `docs-test: {key}` needs its {'module' if key == 'in' else 'reason'}"
            if key == "in":
                importlib.import_module(arg)
        if b.markers:
            assert b.info == "python", f"{b.where}: docs-test markers are for python blocks"


def test_every_rldata_command_of_the_docs_parses():
    blocks = all_blocks()
    n = sum(len(rldata_argvs(line)) for b in blocks if b.info in SHELL for _, line in command_lines(b))
    assert n > 80, n  # the docs' commands are found
    problems = [p for b in blocks for p in command_problems(b)]
    assert not problems, "doc commands the CLI refuses:\n" + "\n".join(problems)


def test_every_python_block_compiles_names_what_it_uses_and_imports_what_exists(tmp_path):
    sources = python_sources(all_blocks())
    assert len(sources) >= 18
    problems = [p for b, code, _ in sources for p in compile_problems(b, code)]
    assert not problems, "\n".join(problems)
    problems = pyflakes_problems(sources, tmp_path)
    problems += [p for b, code, _ in sources for p in import_problems(b, code)]
    assert not problems, "python blocks that drifted:\n" + "\n".join(problems)


def test_the_cheap_python_blocks_run(tmp_path):
    blocks = runnable(python_sources(all_blocks()))
    assert len(blocks) >= 5, [b.where for b, _ in blocks]
    problems = run_problems(blocks, tmp_path)
    assert not problems, "python blocks that fail when run:\n" + "\n".join(problems)


# ---------------------------------------------------------------------------------- the checks fail

BAD_PAGE = """\
```bash
rldata train --no-such-flag 3   # a flag the CLI does not have
rldata frobnicate --n 3
rldata sample --adaptive sometimes
rldata sample --n
rldata --store s3://b/r sample --n 16 \\
    --seed abc
rldata ingest PATH [--preset gsm8k|nosuch]
rldata sample --address <head-ip>:6379 --n 16 ...
rldata ingest --sample arith && rldata runs | head
rldata sql "SELECT 1
```

<!-- docs-test: no-run: only checked -->
```python
from typing import Literal

from rldata.envs import ToolEnv, NoSuchThing


def lookup(city: str, units: Literal["c", "f"] = "c") -> Lteral:
    return city
```

<!-- docs-test: continues -->
```python
where: str = lookup("Paris", units=unit)
```

<!-- docs-test: in rldata.configs.sampling -->
```python
min_q: float = param(0.0, check=finite_between(0, 1), help=no_such_helper)
```
"""


def test_the_checks_report_a_drift(tmp_path):
    page = ROOT / "docs" / "selftest.md"  # never written: the text is given
    blocks = read_blocks(page, BAD_PAGE)
    problems = command_problems(blocks[0])
    text = "\n".join(problems)
    assert "docs/selftest.md:2: `rldata train --no-such-flag 3" in text and "--no-such-flag" in text
    assert "docs/selftest.md:3:" in text and "no such command 'frobnicate'" in text
    assert "docs/selftest.md:4:" in text and "sometimes" in text
    assert "docs/selftest.md:5:" in text and "requires an argument" in text
    assert "docs/selftest.md:6:" in text and "abc" in text  # the continuation, at its first line
    assert "docs/selftest.md:8:" in text and "nosuch" in text  # a synopsis' alternatives each
    assert "docs/selftest.md:11:" in text and "No closing quotation" in text
    assert len(problems) == 7, text  # the placeholders, the elided line and the chain parse
    assert rldata_argvs("rldata ingest --sample arith && rldata runs | head") == [
        ["ingest", "--sample", "arith"],
        ["runs"],
    ]
    assert rldata_argvs("ray job submit -- rldata runs --limit 2") == [["runs", "--limit", "2"]]
    assert rldata_argvs("RLDATA_STORE=/tmp/s rldata tables") == [["tables"]]

    sources = python_sources(blocks)
    (b, code, _), (b2, code2, _), (b3, _, _) = sources
    assert b2.marker("continues") == "" and code2.startswith(code) and b.marker("no-run") == "only checked"
    assert b3.marker("in") == "rldata.configs.sampling" and not runnable(sources)  # a continuation of no-run
    flakes = pyflakes_problems(sources, tmp_path)
    assert flakes == [  # each once, at its own line; the fragment may use the module's names
        "docs/selftest.md:21: F821 Undefined name `Lteral`",
        "docs/selftest.md:27: F821 Undefined name `unit`",
        "docs/selftest.md:32: F821 Undefined name `no_such_helper`",
    ], flakes
    assert import_problems(b, code) == [
        "docs/selftest.md:16: `from rldata.envs import NoSuchThing`: rldata.envs has no NoSuchThing"
    ]
    d = tmp_path / "run"
    d.mkdir()
    (failed,) = run_problems([(b, "lookup(Lteral)"), (b, "x = 1")], d)  # the second still runs
    assert failed.startswith("docs/selftest.md:16: raised:") and "NameError" in failed, failed


def name_problems(argv: list[str]) -> list[str]:
    """Why a mention of a command in prose (``rldata ingest --env``) names what the CLI lacks: each
    subcommand and each option name must exist; values, arguments and required options may be left
    out, as prose mentions them."""
    cmd, name, args = _cli(), "rldata", list(argv)
    while True:
        ctx = cmd.context_class(cmd, info_name=name)
        params = cmd.get_params(ctx)
        known = {o: p for p in params for o in [*p.opts, *p.secondary_opts] if o.startswith("-")}
        i = 0
        while i < len(args) and args[i].startswith("-") and len(args[i]) > 1:
            opt = args[i].split("=", 1)[0]
            if opt not in known:
                return [f"{name}: no such option {opt}"]
            flag = getattr(known[opt], "is_flag", False) or getattr(known[opt], "count", False)
            i += 1 if flag or "=" in args[i] else 2
        rest = args[i:]
        if not isinstance(cmd, typer.core.TyperGroup):
            bad = [t.split("=", 1)[0] for t in rest if re.match(r"^--?[A-Za-z]", t)]
            bad = [t for t in bad if t not in known]
            return [f"{name}: no such option {t}" for t in bad]
        if not rest:
            return []
        sub = cmd.get_command(ctx, rest[0])
        if sub is None:
            return [f"{name}: no such command {rest[0]!r}"]
        cmd, name, args = sub, f"{name} {rest[0]}", rest[1:]


def prose_mentions(page: Path, text: str | None = None) -> list[tuple[int, str]]:
    """(line, span) of each inline ``rldata ...`` code span outside the fenced blocks."""
    out, fenced = [], False
    for no, line in enumerate((page.read_text() if text is None else text).splitlines(), 1):
        if re.match(r"^\s*(```|~~~)", line):
            fenced = not fenced
        elif not fenced:
            out += [(no, m.group(1)) for m in re.finditer(r"`(rldata [^`]+)`", line)]
    return out


def test_every_rldata_command_named_in_the_prose_exists():
    problems, n = [], 0
    for page in PAGES:
        for no, span in prose_mentions(page):
            n += 1
            try:
                argvs = rldata_argvs(span)
            except ValueError:
                argvs = [span.split()[1:]]
            for argv in argvs:
                problems += [f"{page.relative_to(ROOT)}:{no}: `{span}`: {p}" for p in name_problems(argv)]
    assert n > 150, n
    assert not problems, "commands or options the prose names that the CLI lacks:\n" + "\n".join(problems)


def test_the_prose_check_reports_a_drift():
    text = "Run `rldata train --no-such-flag` or `rldata lintt`; `rldata ingest --env` and\n"
    text += "`rldata --store S env register NAME --openenv URL --mcp` exist.\n```bash\nrldata lintt\n```\n"
    spans = prose_mentions(ROOT / "docs" / "selftest.md", text)
    assert [s for _, s in spans] == [
        "rldata train --no-such-flag",
        "rldata lintt",
        "rldata ingest --env",
        "rldata --store S env register NAME --openenv URL --mcp",
    ]
    assert [name_problems(rldata_argvs(s)[0]) for _, s in spans] == [
        ["rldata train: no such option --no-such-flag"],
        ["rldata: no such command 'lintt'"],
        [],
        [],
    ]
