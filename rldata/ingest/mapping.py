"""Map a chunk of source records to ``tasks`` rows: field mapping, reject checks, normalization, ids.

Everything here is a Polars expression or a whole-column operation; the only per-row Python is the
``boxed`` answer format (brace matching) and chat/tests columns that need JSON.  Each check is a
(condition, field, reason) triple; the first failing one names a rejected row's field and reason.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata

import duckdb
import polars as pl

from rldata.ingest.presets import Fields, last_boxed
from rldata.ingest.read import KIND_PREFIX, POS, Chunk, Limits, Reject
from rldata.store.validate import CONTROL_RULE, CONTROL_TEXT

__all__ = ["chunk_tasks", "find", "normalize_series", "normalize_text", "prompt_exprs", "task_id", "with_ids"]

_WS_CLASS = "\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_WS_RE = re.compile(f"[{_WS_CLASS}]+")
_WS_RUN = f"[{_WS_CLASS}]{{2,}}|[{_WS_CLASS.replace(' ', '')}]"  # every run but a lone space: fewer matches
# invisible format characters that make two equal-looking prompts differ: zero-width space/joiners,
# word joiner, BOM, soft hyphen, and the bidirectional embeddings, overrides, isolates and marks
_INVISIBLE = "\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
_INVISIBLE_RE = re.compile(f"[{_INVISIBLE}]")
_SEP = "\x1f"  # between the parts of a task_id key
_MESSAGES = pl.List(pl.Struct({"role": pl.String, "content": pl.String}))
_RECOMPUTED = {"task_id", "created_at"}  # re-ingesting an exported tasks file: these are made anew


# ---- normalization and ids ----------------------------------------------------------------------
def normalize_text(text: str) -> str:
    """NFKC, zero-width and bidi controls removed, every whitespace run -> one space, no outer spaces
    (what dedup and ``task_id`` compare)."""
    if not text.isascii():
        text = _INVISIBLE_RE.sub("", unicodedata.normalize("NFKC", text))
    return _WS_RE.sub(" ", text).strip(" ")


def task_id(prompt: str, answer: str | None, source: str) -> str:
    """sha256 hex of the normalized (prompt, answer, source): the same task always gets the same id."""
    key = _SEP.join([normalize_text(prompt), normalize_text(answer or ""), source.strip()])
    return hashlib.sha256(key.encode()).hexdigest()


def normalize_series(s: pl.Series) -> pl.Series:
    """:func:`normalize_text` over a column; NFKC only where a value is not ASCII (it is slow)."""
    non_ascii = s.str.contains(r"[^\x00-\x7f]").fill_null(False)
    if non_ascii.any():
        idx = non_ascii.arg_true()
        s = s.scatter(idx, s.gather(idx).str.normalize("NFKC").str.replace_all(f"[{_INVISIBLE}]", ""))
    return s.str.replace_all(_WS_RUN, " ").str.strip_chars(" ")


def _sha256(keys: pl.Series) -> pl.Series:
    con = duckdb.connect()
    con.register("keys", keys.to_frame("k").to_arrow())
    return con.sql("SELECT sha256(k) AS h FROM keys").pl()["h"]  # projection keeps row order


# ---- columns -> task fields ---------------------------------------------------------------------
def find(frame: pl.DataFrame, names: tuple[str, ...]):
    """(expr, dtype, name) of the first candidate column present; dotted names reach into structs."""
    for name in names:
        if name in frame.columns:
            return pl.col(name), frame.schema[name], name
        head, *path = name.split(".")
        if not path or head not in frame.columns:
            continue
        expr, dtype = pl.col(head), frame.schema[head]
        for part in path:
            sub = {f.name: f.dtype for f in dtype.fields} if isinstance(dtype, pl.Struct) else {}
            if part not in sub:
                break
            expr, dtype = expr.struct.field(part), sub[part]
        else:
            return expr, dtype, name
    return None


def _is_chat(dtype) -> bool:
    """A list of {role, content} with text content (multimodal content parts are not supported)."""
    inner = dtype.inner if isinstance(dtype, pl.List) else None
    if not isinstance(inner, pl.Struct):
        return False
    types = {f.name: f.dtype for f in inner.fields}
    return {"role", "content"} <= set(types) and all(
        types[k] in (pl.String, pl.Null) for k in ("role", "content")
    )


def _text(frame, hit, checks, *, kinds_ok=(), numbers=True, nested_json=False) -> pl.Expr:
    """A hit column as text; wrong types add a reject check.  Numbers become text if ``numbers``."""
    if hit is None:
        return pl.lit(None, dtype=pl.String)
    expr, dtype, name = hit
    if dtype == pl.String:
        kind_col = KIND_PREFIX + name
        if kind_col in frame.columns:  # slow path: this column mixed types
            bad = pl.col(kind_col).is_not_null() & ~pl.col(kind_col).is_in(list(kinds_ok))
            checks.append((bad, name, pl.lit("expected text, got ") + pl.col(kind_col)))
        return expr
    if dtype == pl.Null:
        return pl.lit(None, dtype=pl.String)
    if numbers and dtype.is_float():  # Parquet/Arrow doubles: NaN and inf are not values
        checks.append(
            (expr.is_nan() | expr.is_infinite(), name, pl.lit("non-finite number: numbers must be finite"))
        )
    if numbers and (dtype.is_numeric() or dtype == pl.Boolean):
        return expr.cast(pl.String)
    if nested_json and isinstance(dtype, pl.Struct):
        return expr.struct.json_encode()
    if nested_json and dtype.is_nested():
        return expr.map_elements(
            lambda v: json.dumps(v.to_list() if hasattr(v, "to_list") else v), return_dtype=pl.String
        )
    checks.append((expr.is_not_null(), name, pl.lit(f"expected text, got {dtype}")))
    return pl.lit(None, dtype=pl.String)


def _control(text: pl.Expr, name: str, checks) -> None:
    """A text with a refused control character (rldata.store.validate.CONTROL_TEXT) is rejected, naming it."""
    code = text.str.extract(f"({CONTROL_TEXT})").str.head(1).str.encode("hex").str.to_uppercase()
    bad = text.str.contains(CONTROL_TEXT).fill_null(False)
    checks.append((bad, name, pl.format(f"control character U+00{{}}: {CONTROL_RULE}", code)))


def _contents(msgs: pl.Expr) -> pl.Expr:
    return msgs.list.eval(pl.element().struct.field("content")).list.join("\n")


def prompt_exprs(frame, fields: Fields, checks) -> tuple[pl.Expr, pl.Expr]:
    """(prompt text, chat messages) expressions."""
    hit = find(frame, fields.prompt)
    no_msgs = pl.lit(None, dtype=_MESSAGES)
    if hit is None:
        cols = ", ".join(c for c in frame.columns if not c.startswith("__"))
        checks.append((pl.lit(True), fields.prompt[0], pl.lit(f"missing (no such column; columns: {cols})")))
        return pl.lit(None, dtype=pl.String), no_msgs
    expr, dtype, name = hit
    if _is_chat(dtype):
        msgs = expr.list.eval(
            pl.struct(
                pl.element().struct.field("role").cast(pl.String),
                pl.element().struct.field("content").cast(pl.String),
            )
        )
        user = msgs.list.eval(
            pl.element().filter(pl.element().struct.field("role") == "user").struct.field("content")
        ).list.last()
        checks.append((expr.is_null(), name, pl.lit("missing")))
        checks.append((user.is_null(), name, pl.lit("no user turn in the chat messages")))
        _control(_contents(msgs), name, checks)
        return user, msgs.cast(_MESSAGES)
    prompt = _text(frame, hit, checks, numbers=False)
    checks.append((prompt.is_null(), name, pl.lit("missing")))
    _control(prompt, name, checks)
    mhit = find(frame, fields.messages)
    msgs = mhit[0].cast(_MESSAGES) if mhit is not None and _is_chat(mhit[1]) else no_msgs
    if mhit is not None and _is_chat(mhit[1]):
        _control(_contents(msgs), mhit[2], checks)
    return prompt, msgs


def _answer(frame, fields: Fields, checks, has_tests: pl.Expr) -> tuple[pl.Expr, str | None]:
    hit = fmt = None
    for column, fmt in fields.answer:
        if (hit := find(frame, (column,))) is not None:
            break
    if hit is None:
        name = fields.answer[0][0] if fields.answer else "answer"
        checks.append(
            (has_tests.not_(), name, pl.lit("missing (no such column; tasks need an answer or tests)"))
        )
        return pl.lit(None, dtype=pl.String), None
    raw = _text(frame, hit, checks, kinds_ok=("number",))
    name = hit[2]
    _control(raw, name, checks)
    if fmt == "gsm8k":  # vectorized gsm8k_answer: the text after the last '####', commas removed
        ans = pl.when(raw.str.contains("####", literal=True)).then(
            raw.str.split("####").list.last().str.replace_all(",", "", literal=True).str.strip_chars()
        )
        checks.append(
            (
                raw.is_not_null() & (ans.is_null() | (ans == "")),
                name,
                pl.lit("no '#### <answer>' line in the solution"),
            )
        )
    elif fmt == "boxed":
        ans = raw.map_elements(last_boxed, return_dtype=pl.String)
        checks.append(
            (raw.is_not_null() & ans.is_null(), name, pl.lit("no \\boxed{...} answer in the solution"))
        )
    else:
        ans = raw.str.strip_chars()
        checks.append((ans == "", name, pl.lit("empty answer")))
    checks.append((raw.is_null() & has_tests.not_(), name, pl.lit("missing")))
    return ans, name


def _label(frame, names, const, default, checks) -> tuple[pl.Expr, str | None]:
    """source / domain: a constant override, else the column (nulls -> default), else the default."""
    if const is not None:
        return pl.lit(const, dtype=pl.String), None
    hit = find(frame, names)
    return _text(frame, hit, checks).fill_null(pl.lit(default)), (hit[2] if hit else None)


def _metadata(frame, fields: Fields, used: set[str]) -> pl.Expr:
    """Everything the mapping did not use, as one JSON object per row (None when nothing is left)."""
    parts, names = [], set()
    for key, column in fields.keep:
        if column in frame.columns:
            parts.append(pl.col(column).alias(key))
            names.add(key)
    mhit = find(frame, fields.metadata)
    skip = used | _RECOMPUTED | ({mhit[2]} if mhit else set())
    extras = [c for c in frame.columns if c not in skip and not c.startswith("__") and c not in names]
    parts += [pl.col(c) for c in extras]
    names.update(extras)
    if mhit is not None:
        expr, dtype, mname = mhit
        if dtype == pl.String:  # JSON text: unpack objects so keys do not nest one level deeper
            try:
                decoded = frame.select(expr).to_series().str.json_decode(infer_schema_length=None)
                expr, dtype = pl.lit(decoded), decoded.dtype
            except Exception:  # noqa: BLE001, S110 - not JSON objects: keep the text under its name
                pass
        if isinstance(dtype, pl.Struct):
            parts += [expr.struct.field(f.name) for f in dtype.fields if f.name not in names]
        elif dtype != pl.Null:
            parts.append(expr.alias(mname))
    return pl.struct(parts).struct.json_encode() if parts else pl.lit(None, dtype=pl.String)


def _size_checks(frame: pl.DataFrame, limits: Limits, checks: list) -> None:
    """A text value over ``limits.field_bytes`` is rejected, naming its column."""
    for name, dtype in frame.schema.items():
        if dtype == pl.String and not name.startswith("__"):
            why = f"text of {{}} bytes, over the limit of {limits.field_bytes} (--limit field_bytes=N)"
            size = pl.col(name).str.len_bytes()
            checks.append((size > limits.field_bytes, name, pl.format(why, size)))


def chunk_tasks(
    chunk: Chunk, fields: Fields, *, source, domain, default_source, limits: Limits | None = None
) -> tuple[pl.DataFrame, list]:
    """Map one chunk to task rows (plus POS and the normalized prompt) and (pos, Reject) pairs."""
    frame, checks = chunk.frame, []
    limits = limits or Limits()
    _size_checks(frame, limits, checks)
    prompt, messages = prompt_exprs(frame, fields, checks)
    chars = prompt.str.len_chars()
    why = f"prompt of {{}} characters, over the limit of {limits.prompt_chars} (--limit prompt_chars=N)"
    checks.append((chars > limits.prompt_chars, fields.prompt[0], pl.format(why, chars)))
    tests_hit = find(frame, fields.tests)
    tests = _text(frame, tests_hit, checks, kinds_ok=("object", "array"), nested_json=True)
    answer, answer_col = _answer(frame, fields, checks, tests.is_not_null())
    src, src_col = _label(frame, fields.source, source, default_source, checks)
    dom, dom_col = _label(frame, fields.domain, domain, "math", checks)
    cat_hit = find(frame, fields.category)
    category = _text(frame, cat_hit, checks, kinds_ok=("number",))
    used = {h[2] for h in (find(frame, fields.prompt), find(frame, fields.messages), tests_hit, cat_hit) if h}
    used |= {c for c in (answer_col, src_col, dom_col) if c}
    reason = field_ = None
    for bad, name, why in checks:  # first failing check wins: its field and reason name the reject
        reason = (reason.when(bad) if reason is not None else pl.when(bad)).then(why)
        field_ = (field_.when(bad) if field_ is not None else pl.when(bad)).then(pl.lit(name))
    out = frame.select(
        pl.col(POS),
        prompt.alias("prompt"),
        messages.alias("messages"),
        answer.alias("answer"),
        src.str.strip_chars().alias("source"),
        dom.alias("domain"),
        category.alias("category"),
        tests.alias("tests"),
        _metadata(frame, fields, used).alias("metadata"),
        (reason.otherwise(None) if reason is not None else pl.lit(None, dtype=pl.String)).alias("__reason"),
        (field_.otherwise(None) if field_ is not None else pl.lit(None, dtype=pl.String)).alias("__field"),
    )
    out = out.with_columns(normalize_series(out["prompt"]).alias("__norm"))
    empty = pl.col("__reason").is_null() & (pl.col("__norm") == "")
    out = out.with_columns(
        pl.when(empty).then(pl.lit("empty prompt")).otherwise("__reason").alias("__reason"),
        pl.when(empty).then(pl.lit(fields.prompt[0])).otherwise("__field").alias("__field"),
    )
    bad_rows = out.filter(pl.col("__reason").is_not_null())
    rejects = [
        (r[POS], Reject(chunk.path, chunk.where(r[POS]), r["__field"], r["__reason"]))
        for r in bad_rows.select(POS, "__field", "__reason").iter_rows(named=True)
    ]
    rejects += [(int(r.where) if r.where.isdigit() else 0, r) for r in chunk.rejects]
    ok = out.filter(pl.col("__reason").is_null()).drop("__reason", "__field")
    return ok, sorted(rejects, key=lambda p: p[0])


def with_ids(frame: pl.DataFrame) -> pl.DataFrame:
    """Add ``task_id`` (vectorized :func:`task_id`); done after dedup, so duplicates are never hashed."""
    key = pl.concat_str(
        [frame["__norm"], normalize_series(frame["answer"]).fill_null(""), frame["source"]], separator=_SEP
    )
    return frame.with_columns(_sha256(frame.select(key.alias("k"))["k"]).alias("task_id"))
