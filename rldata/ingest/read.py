"""Read task files in chunks: JSON lines, Parquet, CSV/TSV and local Hugging Face dataset directories.

Each chunk is a Polars frame of the file's own columns plus ``__pos``: the 1-based line of a JSON-lines
or CSV record, or the 0-based row of a Parquet / Arrow record, so that every error can name its place.
Records that cannot be parsed at all (bad JSON, a line that is not an object, a CSV row with the
wrong number of fields, a line longer or nested deeper than :class:`Limits` allow, a non-finite number)
come back as rejects of the chunk rather than as rows.

Numbers keep their value: the columns named in ``exact`` (the answer's candidates) keep a JSON number's
source text (``1.50``, ``12345678901234567890123``); elsewhere an integer beyond int64 or a decimal that
a double would turn into 0 keeps its text, and ``NaN``, ``Infinity`` or ``1e400`` are refused.

JSON lines are parsed by Arrow in one vectorized pass; only a chunk that Arrow refuses (a syntax
error, or a column whose type changes from line to line) is re-read line by line in Python, which
finds the bad lines.  In that slow path a column of mixed types becomes text, and ``__kind_<col>``
records each value's original JSON type so the caller can reject, say, an object where text belongs.
Blocks that Arrow would read lossily (a float in an ``exact`` column, a long or exponent number next to
a float column) and blocks with an over-long or over-deep line take the slow path too: Arrow's reader
crashes on JSON nested thousands deep, and Python's recurses.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from rldata.errors import ConfigError, DuplicateKeyError, InputError, unique_keys

__all__ = [
    "KIND_PREFIX",
    "POS",
    "SUFFIXES",
    "Chunk",
    "ExactNumber",
    "Limits",
    "Reject",
    "file_kind",
    "read_chunks",
]

POS = "__pos"
KIND_PREFIX = "__kind_"
SUFFIXES = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".tsv": "csv",
}
_CHUNK_BYTES = 32 << 20  # JSON lines / CSV read per chunk (one progress step)
_CHUNK_ROWS = 200_000  # Parquet / Arrow rows per chunk
_NOT_OBJECT = re.compile(rb"(?m)^[ \t\r]*[^{\s]")  # a line that is not blank and not a JSON object
# a number a double may not hold exactly (an exponent: 1e-400 -> 0.0; 19+ digits: 2**63 and up) or
# NaN / Infinity, which Arrow accepts
_RISKY_NUMBER = re.compile(rb"[0-9][eE][+-]?[0-9]|[0-9]{19}|NaN|Infinity")
_BOM = b"\xef\xbb\xbf"
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b"{}[]\n")  # deleted before counting depth
_INT64 = 1 << 63


@dataclass(frozen=True)
class Limits:
    """Bounds on one input record; a record over one is rejected, naming the limit (``--limit``)."""

    depth: int = 100  # nesting of JSON arrays/objects in one line
    line_bytes: int = 16 << 20  # one JSON line (or CSV record)
    field_bytes: int = 4 << 20  # one text value (a column of a record)
    prompt_chars: int = 1_000_000  # the prompt, in characters

    def __post_init__(self):
        for name in ("depth", "line_bytes", "field_bytes", "prompt_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"limit {name} must be a positive integer, got {value!r}", field=name)

    @classmethod
    def parse(cls, items) -> Limits:
        """``["depth=200", "prompt_chars=50000"]`` (the CLI's ``--limit``) -> Limits."""
        names = [f.name for f in fields(cls)]
        given = {}
        for item in items or ():
            name, sep, value = str(item).partition("=")
            name = name.strip().replace("-", "_")
            if not sep or name not in names:
                raise ConfigError(
                    f"--limit: expected NAME=N with NAME one of {', '.join(names)}, got {item!r}",
                    field="limit",
                )
            try:
                given[name] = int(value.strip().replace("_", ""))
            except ValueError:
                raise ConfigError(
                    f"--limit {name}: expected an integer, got {value.strip()!r}", field="limit"
                ) from None
        return cls(**given)


class ExactNumber(str):
    """A JSON number kept as its source text (a value a float or int64 would change)."""


@dataclass(frozen=True)
class Reject:
    """A record that did not become a task: where it is, which field, why."""

    path: str
    where: str  # "17" (a line) or "row 3" / "train row 3" (tabular)
    field: str | None
    reason: str

    def error(self) -> InputError:
        return InputError(self.path, self.where, self.reason, self.field)

    def __str__(self) -> str:
        return str(self.error())


@dataclass
class Chunk:
    frame: pl.DataFrame  # the source's columns + POS (+ KIND_PREFIX columns in the slow path)
    unit: str  # "line" or "row" (or "train row" for a dataset split): how POS is shown
    path: str
    rejects: list[Reject] = field(default_factory=list)
    nbytes: int = 0  # bytes of the file this chunk covered (progress)

    def where(self, pos: int) -> str:
        return str(pos) if self.unit == "line" else f"{self.unit} {pos}"


def file_kind(path: Path) -> str:
    if path.is_dir():
        return "dir"
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise InputError(
            str(path), None, f"unknown file type {path.suffix!r}; use one of {', '.join(SUFFIXES)}"
        )
    return kind


def read_chunks(path: str | Path, *, exact=(), limits: Limits | None = None) -> Iterator[Chunk]:
    """Chunks of ``path``: a file, a ``save_to_disk`` dataset directory, or a directory of files.

    ``exact``: columns whose JSON numbers keep their source text.  ``limits``: see :class:`Limits`.
    """
    path = Path(path)
    limits = limits or Limits()
    exact = frozenset(c.split(".")[0] for c in exact)
    if not path.exists():
        raise InputError(str(path), None, "no such file or directory")
    kind = file_kind(path)
    if kind == "jsonl":
        yield from _jsonl_chunks(path, exact, limits)
    elif kind == "parquet":
        yield from _parquet_chunks(path)
    elif kind == "csv":
        yield from _csv_chunks(path, limits)
    elif (path / "state.json").exists() or (path / "dataset_dict.json").exists():
        yield from _hf_chunks(path)
    else:
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
        if not files:
            raise InputError(str(path), None, "not a Hugging Face dataset directory and holds no task files")
        for p in files:
            yield from read_chunks(p, exact=exact, limits=limits)


# ---- JSON lines -------------------------------------------------------------------------------
def _jsonl_chunks(path: Path, exact: frozenset, limits: Limits) -> Iterator[Chunk]:
    first_line = 1
    with open(path, "rb") as f:
        while True:
            block = f.read(_CHUNK_BYTES)
            if not block:
                return
            block += f.readline()  # finish the last line so a record never straddles two chunks
            if first_line == 1 and block.startswith(_BOM):  # a UTF-8 byte-order mark (Windows editors)
                block = block[len(_BOM) :]
            yield _jsonl_block(block, path, first_line, exact, limits)
            first_line += block.count(b"\n")


def _line_numbers(block: bytes, first_line: int, *, exact: bool) -> np.ndarray:
    """Numbers of the lines of ``block`` that are not blank (Arrow skips blank lines).

    Without ``exact`` every line counts unless the block has an empty line; the caller checks the
    count against Arrow's rows and asks again with ``exact`` (whitespace-only lines) on a mismatch.
    """
    if not exact and b"\n\n" not in block and not block.startswith(b"\n"):
        n = block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
        return np.arange(first_line, first_line + n, dtype=np.int64)
    return np.array(
        [first_line + i for i, line in enumerate(block.split(b"\n")) if line.strip()], dtype=np.int64
    )


def _jsonl_block(block: bytes, path: Path, first_line: int, exact: frozenset, limits: Limits) -> Chunk:
    def slow() -> Chunk:
        return _jsonl_slow(block, path, first_line, exact, limits)

    try:
        block.decode("utf-8")  # Arrow's JSON reader does not check: bad bytes would reach the store
    except UnicodeDecodeError:
        return slow()  # rejects each undecodable line
    if _NOT_OBJECT.search(block):  # pyarrow 26's JSON reader crashes (SIGSEGV) on a top-level `null`
        return slow()
    if _over_limits(block, limits):  # Arrow's reader crashes on lines nested thousands deep
        return slow()
    try:
        table = _arrow_json(block)
        if _lossy(table.schema, block, exact):
            return slow()
        lines = _line_numbers(block, first_line, exact=False)
        if table.num_rows != len(lines):
            lines = _line_numbers(block, first_line, exact=True)
        if table.num_rows == len(lines):
            frame = pl.from_arrow(table) if table.num_columns else pl.DataFrame(height=table.num_rows)
            return Chunk(frame.with_columns(pl.Series(POS, lines)), "line", str(path), nbytes=len(block))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass  # a bad line or a column of mixed types: find out line by line below
    return slow()


def _over_limits(block: bytes, limits: Limits) -> bool:
    """Whether a line of ``block`` may be longer or deeper than ``limits`` (the slow path checks exactly).

    Depth is counted from brackets, strings included: it over-counts, never under-counts.  It runs
    over the block's brackets and newlines alone (``translate`` drops the rest in one C pass).
    """
    arr = np.frombuffer(block, dtype=np.uint8)
    bounds = np.concatenate(([-1], np.flatnonzero(arr == 10), [len(arr)]))
    if int(np.diff(bounds).max()) - 1 > limits.line_bytes:
        return True
    small = np.frombuffer(block.translate(None, _NOT_STRUCTURE), dtype=np.uint8)
    step = np.zeros(len(small), dtype=np.int32)
    step[(small == ord("{")) | (small == ord("["))] = 1
    if int(step.sum()) <= limits.depth:
        return False
    step[(small == ord("}")) | (small == ord("]"))] = -1
    depth = np.cumsum(step)
    starts = np.concatenate(([0], np.flatnonzero(small == 10) + 1))
    starts = starts[starts < len(small)]
    base = np.concatenate(([0], depth[starts[1:] - 1]))
    return bool((np.maximum.reduceat(depth, starts) - base).max() > limits.depth)


def _has_float(t: pa.DataType) -> bool:
    if pa.types.is_floating(t):
        return True
    if pa.types.is_struct(t):
        return any(_has_float(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _has_float(t.value_type)
    return False


def _lossy(schema: pa.Schema, block: bytes, exact: frozenset) -> bool:
    """Whether Arrow's doubles may have changed a number: a float in an ``exact`` column (its text is
    the value), or a long or exponent number in a block that has float columns."""
    floats = [f.name for f in schema if _has_float(f.type)]
    return bool(floats) and (any(n in exact for n in floats) or _RISKY_NUMBER.search(block) is not None)


def _arrow_json(block: bytes) -> pa.Table:
    import pyarrow.json as pj

    def read(block_size: int, schema: pa.Schema | None = None) -> pa.Table:
        parse = pj.ParseOptions(explicit_schema=schema) if schema is not None else None
        return pj.read_json(
            io.BytesIO(block), read_options=pj.ReadOptions(block_size=block_size), parse_options=parse
        )

    size = 4 << 20  # several blocks per chunk: Arrow parses them on all cores
    try:
        table = read(size)
    except pa.ArrowInvalid as e:
        if "straddl" not in str(e):  # a line longer than a block: read the chunk as one block
            raise
        size = len(block) + 1
        table = read(size)
    # JSON has no timestamps: Arrow's guess turns "2020-01-01" answers into dates; keep them as text
    fixed = pa.schema([f.with_type(_no_timestamps(f.type)) for f in table.schema])
    return table if fixed.equals(table.schema) else read(size, fixed)


def _no_timestamps(t: pa.DataType) -> pa.DataType:
    if pa.types.is_timestamp(t):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_no_timestamps(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(t.value_field.with_type(_no_timestamps(t.value_type)))
    return t


def _jsonl_slow(block: bytes, path: Path, first_line: int, exact: frozenset, limits: Limits) -> Chunk:
    records, positions, rejects = [], [], []
    for i, raw in enumerate(block.split(b"\n")):
        if not raw.strip():
            continue
        line = first_line + i
        if len(raw) > limits.line_bytes:
            why = f"line is {len(raw)} bytes, over the limit of {limits.line_bytes} (--limit line_bytes=N)"
            rejects.append(Reject(str(path), str(line), None, why))
            continue
        if raw.count(b"[") + raw.count(b"{") > limits.depth and _depth(raw) > limits.depth:
            why = f"JSON nested deeper than the limit of {limits.depth} (--limit depth=N)"
            rejects.append(Reject(str(path), str(line), None, why))
            continue
        try:
            rec = json.loads(
                raw,
                parse_float=ExactNumber,
                parse_int=_int,
                parse_constant=_NonFinite,
                object_pairs_hook=unique_keys,  # Arrow's reader refuses these too: they all come here
            )
            json.dumps(rec, ensure_ascii=False).encode("utf-8")  # a \ud800 escape decodes to a lone surrogate
        except DuplicateKeyError as e:
            rejects.append(Reject(str(path), str(line), e.key, str(e)))
            continue
        except UnicodeEncodeError:
            rejects.append(
                Reject(str(path), str(line), None, "invalid JSON: a lone surrogate escape (not valid UTF-8)")
            )
            continue
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            msg = e.msg if isinstance(e, json.JSONDecodeError) else "not valid UTF-8"
            col = f" (column {e.colno})" if isinstance(e, json.JSONDecodeError) else ""
            rejects.append(Reject(str(path), str(line), None, f"invalid JSON: {msg}{col}"))
            continue
        if not isinstance(rec, dict):
            rejects.append(
                Reject(str(path), str(line), None, f"expected a JSON object, got {_json_type(rec)}")
            )
            continue
        try:
            rec = {k: _settle(v, k in exact, k) for k, v in rec.items()}
        except _Refused as e:
            rejects.append(Reject(str(path), str(line), e.key, str(e)))
            continue
        records.append(rec)
        positions.append(line)
    chunk = Chunk(records_frame(records, positions), "line", str(path), rejects, nbytes=len(block))
    return chunk


def _depth(raw: bytes) -> int:
    """Deepest nesting of arrays/objects in one JSON text (brackets inside strings do not count)."""
    depth = deepest = 0
    in_str = escaped = False
    for c in raw:
        if in_str:
            if escaped:
                escaped = False
            elif c == 92:  # backslash
                escaped = True
            elif c == 34:
                in_str = False
        elif c == 34:
            in_str = True
        elif c in (123, 91):
            depth += 1
            deepest = max(deepest, depth)
        elif c in (125, 93):
            depth -= 1
    return deepest


class _NonFinite(str):
    """``NaN`` / ``Infinity`` / ``-Infinity`` as parsed (refused by :func:`_settle`)."""


class _Refused(Exception):  # internal: becomes a Reject naming the field
    def __init__(self, key: str, reason: str):
        super().__init__(reason)
        self.key = key


def _int(text: str):
    if len(text) > 20:  # beyond int64 (and int() refuses over 4,300 digits): keep every digit as text
        return ExactNumber(text)
    value = int(text)
    return value if -_INT64 <= value < _INT64 else ExactNumber(text)


def _settle(value, exact: bool, key: str | None = None):
    """A parsed JSON value with numbers resolved: an ``exact`` column keeps each number's source text;
    elsewhere a decimal becomes a float unless that changes it (0.0 from 1e-400) or overflows (refused)."""
    if isinstance(value, _NonFinite):
        raise _Refused(key, f"non-finite number {value}: numbers must be finite")
    if isinstance(value, ExactNumber):
        if exact:
            return value
        if not any(c in value for c in ".eE"):
            return value  # an integer beyond int64: its digits, as text
        number = float(value)
        if number in (float("inf"), float("-inf")):
            raise _Refused(key, f"number {value} is out of range (not finite as a double)")
        if number == 0.0 and any(c in "123456789" for c in value.lower().split("e")[0]):
            return value  # underflows to 0.0: keep the text
        return number
    if isinstance(value, dict):
        return {k: _settle(v, exact, key) for k, v in value.items()}
    if isinstance(value, list):
        return [_settle(v, exact, key) for v in value]
    return value


def _json_type(v) -> str:
    if isinstance(v, ExactNumber):
        return "number"
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(v), "number"
    )


def records_frame(records: list[dict], positions: list[int]) -> pl.DataFrame:
    """A frame from parsed records; a column whose values disagree in type becomes text + a kind column."""
    names: dict[str, None] = {}
    for r in records:
        names.update(dict.fromkeys(r))
    cols: dict[str, pl.Series] = {}
    for name in names:
        values = [r.get(name) for r in records]
        if not any(isinstance(v, ExactNumber) for v in values):  # a number kept as text keeps its kind
            try:
                cols[name] = pl.Series(name, pa.array(values))  # Arrow's inference refuses mixed types
                continue
            except (
                pa.ArrowInvalid,
                pa.ArrowTypeError,
                pa.ArrowNotImplementedError,
                OverflowError,
                TypeError,
            ):
                pass
        kinds = [
            None if v is None or (isinstance(v, str) and not isinstance(v, ExactNumber)) else _json_type(v)
            for v in values
        ]
        text = [v if v is None or isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in values]
        cols[name] = pl.Series(name, text, dtype=pl.String)
        cols[KIND_PREFIX + name] = pl.Series(KIND_PREFIX + name, kinds, dtype=pl.String)
    frame = pl.DataFrame(list(cols.values())) if cols else pl.DataFrame(height=len(records))
    return frame.with_columns(pl.Series(POS, positions, dtype=pl.Int64))


# ---- Parquet, Arrow datasets ------------------------------------------------------------------
def _parquet_chunks(path: Path) -> Iterator[Chunk]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise InputError(str(path), None, f"not a readable Parquet file: {e}") from None
    size = path.stat().st_size
    offset = 0
    for batch in pf.iter_batches(batch_size=_CHUNK_ROWS):
        yield _table_chunk(
            pa.Table.from_batches([batch]),
            path,
            "row",
            offset,
            size * batch.num_rows // max(pf.metadata.num_rows, 1),
        )
        offset += batch.num_rows


def _table_chunk(table: pa.Table, path: Path, unit: str, offset: int, nbytes: int) -> Chunk:
    frame = pl.from_arrow(table) if table.num_columns else pl.DataFrame(height=table.num_rows)
    if isinstance(frame, pl.Series):
        frame = frame.to_frame()
    pos = pl.int_range(offset, offset + table.num_rows, dtype=pl.Int64, eager=True).alias(POS)
    return Chunk(frame.with_columns(pos), unit, str(path), nbytes=nbytes)


def _hf_chunks(path: Path) -> Iterator[Chunk]:
    import datasets  # imported here: it takes about a second

    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as e:  # noqa: BLE001 - datasets raises many kinds; all mean "cannot read this"
        raise InputError(str(path), None, f"not a readable Hugging Face dataset: {e}") from None
    splits = loaded.items() if isinstance(loaded, datasets.DatasetDict) else [(None, loaded)]
    for split, ds in splits:
        table = ds.with_format("arrow")[:]  # applies any indices mapping
        unit = "row" if split is None else f"{split} row"
        for offset in range(0, max(table.num_rows, 1), _CHUNK_ROWS):
            part = table.slice(offset, _CHUNK_ROWS)
            yield _table_chunk(part, path, unit, offset, part.nbytes)


# ---- CSV --------------------------------------------------------------------------------------
def _csv_chunks(path: Path, limits: Limits) -> Iterator[Chunk]:
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    # undecodable bytes become lone surrogates, so that one bad record is one reject (with its line);
    # utf-8-sig drops a leading byte-order mark (Excel writes one), which would rename the first column
    with (
        _field_limit(limits.field_bytes),
        open(path, newline="", encoding="utf-8-sig", errors="surrogateescape") as f,
    ):
        counted = _Counting(f)
        reader = csv.reader(counted, delimiter=delimiter)
        try:
            header = next(reader)
        except StopIteration:
            return
        except (csv.Error, UnicodeDecodeError) as e:
            raise InputError(str(path), "1", f"unreadable CSV header: {e}") from None
        if not _utf8(header):
            raise InputError(str(path), "1", "header is not valid UTF-8")
        dup = {h for h in header if header.count(h) > 1}
        if dup:
            raise InputError(str(path), "1", f"duplicate column {min(dup)!r} in the header")
        end_line = reader.line_num
        while True:
            rows, positions, rejects = [], [], []
            before = counted.n
            try:
                for row in reader:
                    line = end_line + 1  # a quoted field may span lines: the record starts here
                    end_line = reader.line_num
                    if not row or all(not v.strip() for v in row):
                        continue
                    if not _utf8(row):
                        rejects.append(Reject(str(path), str(line), None, "not valid UTF-8"))
                    elif len(row) != len(header):
                        rejects.append(
                            Reject(
                                str(path), str(line), None, f"expected {len(header)} fields, got {len(row)}"
                            )
                        )
                    else:
                        rows.append(row)
                        positions.append(line)
                    if len(rows) + len(rejects) >= _CHUNK_ROWS:
                        break
            except (csv.Error, UnicodeDecodeError) as e:
                hint = " (--limit field_bytes=N)" if "field limit" in str(e) else ""
                raise InputError(str(path), str(end_line + 1), f"unreadable CSV: {e}{hint}") from None
            if not rows and not rejects:
                return
            cols = {h: [r[i] or None for r in rows] for i, h in enumerate(header)}  # empty cell = missing
            frame = pl.DataFrame(cols, schema={h: pl.String for h in header})
            frame = frame.with_columns(pl.Series(POS, positions, dtype=pl.Int64))
            yield Chunk(frame, "line", str(path), rejects, nbytes=counted.n - before)


@contextmanager
def _field_limit(n: int):
    """csv's own field limit (131,072 by default) set to ours for this read (a longer field is an error)."""
    old = csv.field_size_limit(n)
    try:
        yield
    finally:
        csv.field_size_limit(old)


def _utf8(row: list[str]) -> bool:
    try:
        "".join(row).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _Counting:
    """Lines of a text file, counting characters read (progress without tell(), which csv forbids)."""

    def __init__(self, f):
        self.f, self.n = f, 0

    def __iter__(self):
        return self

    def __next__(self) -> str:
        line = next(self.f)
        self.n += len(line)
        return line
