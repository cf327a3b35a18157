"""Eval packs: the eval sets tasks are checked against, stored as versioned data in ``eval_items``.

A pack is read from a file or a directory the user supplies (JSON lines, CSV/TSV, Parquet, a
``save_to_disk`` directory: the ingest's readers), or from a bundled sample (:data:`SAMPLES`); nothing
is downloaded.  Each item is its prompt (the first of the prompt columns present: ``--prompt-field``,
the preset's, then ``prompt``, ``question``, ``problem``, ``messages``) and, when the file has one, its
answer.  ``eval_id`` is the sha256 of the normalized prompt (the ingest's normalization), so two
spellings of one prompt in a file are one item; ``pack_version`` is a hash of the pack's sorted
``eval_id``s, so the same items are the same version whatever their order, and a changed file under
the same name is a new version beside the old one.

A bad file is refused whole, before anything is written, with one line naming the file, the line (or
row) and the field: a line that is not JSON, a prompt that is missing, empty or not text, an answer
that is not text or a number, a file with no prompt column or no records.
"""

from __future__ import annotations

import hashlib
import importlib.resources
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from rldata.errors import InputError, RldataError
from rldata.ingest.mapping import find, normalize_series, prompt_exprs
from rldata.ingest.presets import Fields, gsm8k_answer, last_boxed, preset
from rldata.ingest.read import POS, read_chunks
from rldata.names import check_name

__all__ = ["SAMPLES", "EvalPack", "load_pack", "read_pack", "stored_pack", "write_pack"]

SAMPLES = {"gsm8k-test": "gsm8k/test.jsonl"}  # --eval-sample NAME: under rldata.sample_data, and its preset
_PROMPTS = ("prompt", "question", "problem", "messages")
_ANSWERS = (("answer", "text"), ("final_answer", "text"), ("target", "text"), ("solution", "boxed"))


@dataclass(frozen=True)
class EvalPack:
    """A pack's items (columns eval_id, prompt, answer, origin) with its name and version."""

    name: str
    version: str
    items: pl.DataFrame
    source: str  # the file, directory or sample it was read from; "store" for a stored pack

    @property
    def size(self) -> int:
        return self.items.height


def _version(eval_ids: pl.Series) -> str:
    h = hashlib.sha256()
    for e in eval_ids.sort().to_list():
        h.update(e.encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


def _answer(chunk_frame: pl.DataFrame, fields: Fields, path: str, where) -> pl.Expr:
    for column, fmt in (*fields.answer, *_ANSWERS):
        hit = find(chunk_frame, (column,))
        if hit is None:
            continue
        expr, dtype, name = hit
        if dtype == pl.Null:
            return pl.lit(None, dtype=pl.String)
        if dtype != pl.String:
            if not (dtype.is_numeric() or dtype == pl.Boolean):
                bad = chunk_frame.select(expr.is_not_null().arg_max()).item()
                raise InputError(path, where(bad), f"expected text or a number, got {dtype}", name)
            return expr.cast(pl.String)
        if fmt == "gsm8k":
            return expr.map_elements(gsm8k_answer, return_dtype=pl.String)
        if fmt == "boxed":
            return expr.map_elements(last_boxed, return_dtype=pl.String)
        return expr.str.strip_chars()
    return pl.lit(None, dtype=pl.String)


def read_pack(path, *, name: str | None = None, fields: Fields | None = None) -> EvalPack:
    """Read an eval file or directory into a pack (nothing is stored); InputError names a bad record."""
    path = Path(path)
    fields = fields or preset(None)
    names = tuple(dict.fromkeys((*fields.prompt, *_PROMPTS)))
    parts = []
    for chunk in read_chunks(path, exact=[c for c, _ in fields.answer]):
        if chunk.rejects:
            raise chunk.rejects[0].error()
        frame = chunk.frame
        if not frame.height:
            continue
        hit = find(frame, names)
        if hit is None:
            raise InputError(chunk.path, None, f"no prompt column (tried {', '.join(names)})", names[0])
        checks: list = []
        prompt, _ = prompt_exprs(frame, Fields(prompt=(hit[2],)), checks)
        positions = frame[POS]
        answer = _answer(frame, fields, chunk.path, lambda i, c=chunk, p=positions: c.where(p[i]))
        out = frame.select(pl.col(POS), prompt.alias("prompt"), answer.alias("answer"))
        for bad, field, why in checks:
            idx = frame.select(bad.fill_null(False).arg_true()).to_series()
            if idx.len():
                i = int(idx[0])
                reason = frame.with_columns(why.alias("__why"))["__why"][i]
                raise InputError(chunk.path, chunk.where(positions[i]), str(reason), field)
        norm = normalize_series(out["prompt"])
        empty = (out["prompt"].is_null() | (norm == "")).arg_true()
        if empty.len():
            i = int(empty[0])
            raise InputError(chunk.path, chunk.where(positions[i]), "missing or empty prompt", hit[2])
        parts.append(
            out.with_columns(
                norm.alias("__norm"),
                pl.Series("origin", [f"{chunk.path}:{chunk.where(p)}" for p in positions.to_list()]),
            )
        )
    if not parts:
        raise InputError(str(path), None, "no eval items (the file is empty)")
    items = pl.concat(parts, how="vertical_relaxed")
    items = items.filter(pl.col("__norm").is_first_distinct())
    ids = [hashlib.sha256(t.encode()).hexdigest() for t in items["__norm"].to_list()]
    items = items.with_columns(pl.Series("eval_id", ids, dtype=pl.String)).select(
        "eval_id", "prompt", "answer", "origin"
    )
    pack = check_name(name or (path.stem if path.is_file() else path.name), field="name")
    return EvalPack(pack, _version(items["eval_id"]), items, str(path))


def sample_pack_path(sample: str) -> Path:
    if sample not in SAMPLES:
        raise RldataError(
            f"unknown eval sample {sample!r}; samples: {', '.join(SAMPLES)}", field="eval_sample"
        )
    return Path(str(importlib.resources.files("rldata.sample_data").joinpath(SAMPLES[sample])))


def stored_pack(store, name: str) -> EvalPack:
    """The newest version of a stored pack; an unknown name lists the stored ones."""
    check_name(name, field="name")
    rows = store.sql(
        "SELECT eval_id, prompt, answer, origin, pack_version, created_at FROM eval_items WHERE pack = $1",
        params=[name],
    ).pl()
    if not rows.height:
        known = [r for (r,) in store.sql("SELECT DISTINCT pack FROM eval_items ORDER BY 1").fetchall()]
        raise RldataError(
            f"no eval pack {name!r} in the store; packs: {', '.join(known) or '(none: give --eval FILE)'}",
            field="name",
        )
    newest = rows.sort("created_at", "pack_version").row(-1, named=True)["pack_version"]
    items = rows.filter(pl.col("pack_version") == newest).sort("eval_id")
    return EvalPack(name, newest, items.select("eval_id", "prompt", "answer", "origin"), "store")


def load_pack(
    store, *, path=None, sample: str | None = None, name: str | None = None, fields=None
) -> EvalPack:
    """The pack a decontaminate run checks: read from ``path`` or a bundled ``sample``, else the
    stored pack ``name``."""
    if path is not None and sample is not None:
        raise RldataError("give eval (a file) or eval_sample, not both", field="eval_sample")
    if sample is not None:
        return read_pack(sample_pack_path(sample), name=name or sample, fields=fields or preset("gsm8k"))
    if path is not None:
        return read_pack(path, name=name, fields=fields)
    if name is None:
        raise RldataError(
            "give eval (a file or directory), eval_sample, or the name of a stored pack", field="eval"
        )
    return stored_pack(store, name)


def write_pack(store, pack: EvalPack) -> int:
    """Store the pack's items under its name and version (a version already stored adds nothing)."""
    if pack.source == "store":
        return 0
    rows = pack.items.with_columns(
        pl.lit(pack.name).alias("pack"), pl.lit(pack.version).alias("pack_version")
    )
    return store.append("eval_items", rows.to_arrow(), dedupe=True)
