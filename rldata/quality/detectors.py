"""Contamination detectors: which tasks hold (part of) which eval items, each with a score and a span.

Three detectors (:data:`METHODS`), each recording a score per (task, eval item) rather than a yes/no:

- ``ngram``: the share of the eval item's distinct word n-grams that the task holds (n = 8 for math and
  text, 13 for code, as open-r1 and Tulu use).  An eval item shorter than n tokens (at least
  :data:`MIN_WHOLE` of them) counts as one n-gram: only the task holding its whole text matches it.
- ``coverage``: the share of the eval item's tokens that lie inside a ``coverage_n``-gram the task also
  holds (robust to small edits inside the text, such as a changed number).  Computed for the pairs the
  other two detectors make candidates (any shared n-gram, or an LSH collision).
- ``minhash``: the Jaccard similarity of the two texts' token-bigram sets, estimated by MinHash and found
  by LSH (rensa: ``RMinHash`` sketches, ``RMinHashLSH`` banding), for items of at least
  :data:`MIN_MINHASH` tokens.  With 24 bands of 5 rows a pair at J = 0.7 is found with probability 0.99,
  at J = 0.5 about half the time.

All texts go through :mod:`rldata.quality.normalise` first.  Tasks are read in chunks of
:data:`CHUNK`: n-grams are rolling hashes over one flat array per chunk, looked up in the eval items'
sorted n-gram table; coverage and spans are Polars joins of the candidate pairs' n-grams; no Python
object per token is made except the MinHash inputs (one 8-byte token per shingle, which rensa hashes
in Rust).  :func:`detect` returns one row per (task, item, method) at or
over its threshold.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import version
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
import rensa

from rldata.quality.normalise import Tokens, grams, rolling, shingles, subset, token_hashes, tokens, whole

if TYPE_CHECKING:  # the config imports METHODS from here
    from rldata.quality.config import DecontaminateConfig

__all__ = ["CHUNK", "METHODS", "VERSIONS", "EvalIndex", "byte_docs", "detect", "gram_frame"]

METHODS = ("ngram", "coverage", "minhash")
# bump a detector's version whenever what it flags changes: the version is stored with each row
VERSIONS = {"ngram": "ngram-1", "coverage": "coverage-1", "minhash": f"minhash-1+rensa-{version('rensa')}"}
CHUNK = 100_000  # tasks per pass
MIN_WHOLE = 4  # an eval item shorter than this many tokens is never matched as a whole
MIN_MINHASH = 8  # tokens an item needs before MinHash compares it (short texts: n-gram whole match)
NUM_PERM, BANDS = 120, 24  # MinHash permutations and LSH bands (5 rows each)
_SPAN_CHARS = 400
_BITS = 24  # the prefilter bitmap: 2^24 booleans keyed by an n-gram hash's low bits


class _GramTable:
    """One n's eval-side n-grams: sorted (hash, item) pairs, distinct n-grams per item, and the short
    items' whole-text hashes by length."""

    def __init__(self, toks: Tokens, n: int):
        self.n = n
        g, start = rolling(toks, n)
        item = np.searchsorted(toks.offsets, start, side="right") - 1
        pairs = (
            np.unique(np.stack([g, item.astype(np.uint64)], axis=1), axis=0) if len(g) else np.zeros((0, 2))
        )
        self.hash = pairs[:, 0].astype(np.uint64)
        self.item = pairs[:, 1].astype(np.int64)
        self.distinct = np.bincount(self.item, minlength=len(toks)).astype(np.int64)
        lengths = toks.lengths
        short = np.flatnonzero((lengths < n) & (lengths >= MIN_WHOLE))
        self.short: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        if len(short):
            wh = whole(subset(toks, short))
            for length in np.unique(lengths[short]):
                sel = lengths[short] == length
                order = np.argsort(wh[sel], kind="stable")
                self.short[int(length)] = (wh[sel][order], short[sel][order])
                self.distinct[short[sel]] = 1
        self.bitmap = np.zeros(1 << _BITS, dtype=bool)
        self.bitmap[(self.hash & np.uint64((1 << _BITS) - 1)).astype(np.int64)] = True
        for hashes, _ in self.short.values():
            self.bitmap[(hashes & np.uint64((1 << _BITS) - 1)).astype(np.int64)] = True

    def hits(self, toks: Tokens) -> np.ndarray:
        """(task, item, shared distinct n-grams, the item's distinct n-grams, n) for every pair with one
        n-gram in common."""
        found = []
        lengths = (*self.short, self.n)
        for n, g, start in grams(toks, lengths):
            keep = self.bitmap[(g & np.uint64((1 << _BITS) - 1)).astype(np.int64)]
            g, start = g[keep], start[keep]
            table, items = (self.hash, self.item) if n == self.n else self.short[n]
            lo = np.searchsorted(table, g, side="left")
            hi = np.searchsorted(table, g, side="right")
            cnt = hi - lo
            hit = cnt > 0
            if not hit.any():
                continue
            g, start, lo, cnt = g[hit], start[hit], lo[hit], cnt[hit]
            doc = np.searchsorted(toks.offsets, start, side="right") - 1
            rep = np.repeat(np.arange(len(lo)), cnt)
            at = lo[rep] + (np.arange(len(rep)) - np.repeat(np.cumsum(cnt) - cnt, cnt))
            found.append(np.stack([doc[rep].astype(np.uint64), items[at].astype(np.uint64), g[rep]], axis=1))
        if not found:
            return np.zeros((0, 5), dtype=np.int64)
        triples = np.concatenate(found)
        per_pair = (  # distinct n-grams per (task, item)
            pl.DataFrame(
                {"t": triples[:, 0].astype(np.int64), "e": triples[:, 1].astype(np.int64), "h": triples[:, 2]}
            )
            .unique()
            .group_by("t", "e")
            .len()
            .sort("t", "e")
        )
        pairs = per_pair.select("t", "e").to_numpy()
        shared = per_pair["len"].to_numpy().astype(np.int64)
        return np.column_stack([pairs, shared, self.distinct[pairs[:, 1]], np.full(len(pairs), self.n)])


def byte_docs(sh: Tokens) -> list[list[bytes]]:
    """Each text's shingle hashes as 8-byte tokens: the input rensa's MinHash hashes."""
    flat = sh.hashes.view("S8").tolist()
    bounds = sh.offsets.tolist()
    return [flat[a:b] for a, b in pairwise(bounds)]


class EvalIndex:
    """An eval pack's items made ready to match: n-gram tables and MinHash sketches."""

    def __init__(self, prompts: pl.Series, det: DecontaminateConfig):
        self.det = det  # the detectors (methods) and their thresholds
        self.prompts = prompts
        self.toks = token_hashes(prompts)
        self.tables: dict[int, _GramTable] = {}
        self.minhashes = None
        if "minhash" in det.methods:
            big = np.flatnonzero(self.toks.lengths >= MIN_MINHASH)
            objs = rensa.RMinHash.from_token_sets(byte_docs(shingles(subset(self.toks, big))), NUM_PERM, 0)
            self.minhashes = list(zip(big.tolist(), objs, strict=True))

    def table(self, n: int) -> _GramTable:
        if n not in self.tables:
            self.tables[n] = _GramTable(self.toks, n)
        return self.tables[n]


def gram_frame(toks: Tokens, c: int) -> pl.DataFrame:
    """Every c-gram of every text: (doc, start, h), start counted within the text."""
    g, start = rolling(toks, c)
    doc = np.searchsorted(toks.offsets, start, side="right") - 1
    return pl.DataFrame(
        {"doc": doc.astype(np.int64), "start": start - toks.offsets[doc], "h": g},
        schema={"doc": pl.Int64, "start": pl.Int64, "h": pl.UInt64},
    )


def _covered(pairs: pl.DataFrame, side: pl.DataFrame, other: pl.DataFrame, c: int) -> pl.DataFrame:
    """(pair, pos): the positions of ``side``'s text in each pair inside a c-gram ``other``'s text of
    the pair also holds.  ``pairs`` has pair, side, other; ``side``/``other`` are c-gram frames."""
    hits = pairs.join(side.rename({"doc": "side"}), on="side").join(
        other.select(pl.col("doc").alias("other"), "h").unique(), on=["other", "h"], how="semi"
    )
    pos = hits.select("pair", (pl.col("start") + pl.int_ranges(0, c)).alias("pos")).explode("pos")
    return pos.unique()


def _coverage(task: Tokens, item: Tokens, pairs: np.ndarray, c: int) -> np.ndarray:
    """For (task idx, item idx) pairs: the share of the item's tokens inside a c-gram the task holds
    (an item shorter than c: 1 when the task holds it whole, else 0)."""
    out = np.zeros(len(pairs))
    if not len(pairs):
        return out
    lengths = item.lengths[pairs[:, 1]]
    frame = pl.DataFrame({"pair": np.arange(len(pairs)), "side": pairs[:, 1], "other": pairs[:, 0]})
    long = frame.filter(pl.Series(lengths >= c))
    pos = _covered(long, gram_frame(item, c), gram_frame(task, c), c)
    counts = pos.group_by("pair").len()
    out[counts["pair"].to_numpy()] = counts["len"].to_numpy() / lengths[counts["pair"].to_numpy()]
    for k in np.flatnonzero((lengths < c) & (lengths > 0)).tolist():  # short items: a whole match
        t, e = int(pairs[k, 0]), int(pairs[k, 1])
        one = subset(item, np.array([e]))
        out[k] = float(
            int(whole(one)[0]) in set(rolling(subset(task, np.array([t])), int(one.lengths[0]))[0].tolist())
        )
    return out


def _spans(words: list[list[str]], task: Tokens, item: Tokens, rows: pl.DataFrame) -> list[str]:
    """For rows (t, e, c): the longest run of task t's tokens inside c-grams item e also holds, as text."""
    item_len = item.lengths[rows["e"].to_numpy()]
    c_eff = np.maximum(1, np.minimum(rows["c"].to_numpy(), np.maximum(item_len, 1)))
    frame = rows.with_columns(pl.Series("c_eff", c_eff), pl.int_range(pl.len()).alias("pair"))
    parts = []
    for c in np.unique(c_eff).tolist():
        sel = frame.filter(pl.col("c_eff") == c).select(
            "pair", pl.col("t").alias("side"), pl.col("e").alias("other")
        )
        parts.append(_covered(sel, gram_frame(task, c), gram_frame(item, c), c))
    pos = pl.concat(parts) if parts else pl.DataFrame(schema={"pair": pl.Int64, "pos": pl.Int64})
    runs = (
        pos.sort("pair", "pos")
        .with_columns((pl.col("pos") - pl.col("pos").rank("ordinal").over("pair")).alias("run"))
        .group_by("pair", "run")
        .agg(pl.col("pos").min().alias("a"), pl.len().alias("n"))
        .sort("pair", "n", "a", descending=[False, True, False])
        .unique("pair", keep="first")
    )
    best = {p: (a, a + n) for p, a, n in runs.select("pair", "a", "n").iter_rows()}
    out = []
    for p, t in enumerate(rows["t"].to_list()):
        a, b = best.get(p, (0, 0))
        text = " ".join(words[t][a:b])
        out.append(text if len(text) <= _SPAN_CHARS else text[: _SPAN_CHARS - 3] + "...")
    return out


def detect(
    tasks: pl.DataFrame,
    index: EvalIndex,
    *,
    progress: Callable[[int], None] | None = None,
) -> pl.DataFrame:
    """Rows (task_id, eval_idx, method, score, threshold, span) for every task of ``tasks`` (columns
    task_id, prompt, domain) whose score against an eval item reaches the method's threshold."""
    det = index.det
    found: list[np.ndarray] = []
    lsh = rensa.RMinHashLSH(det.jaccard, NUM_PERM, BANDS) if index.minhashes else None
    code = (tasks["domain"] == "code").fill_null(False).to_numpy()
    for at in range(0, tasks.height, CHUNK):
        chunk = tasks.slice(at, CHUNK)
        toks = token_hashes(chunk["prompt"])
        groups: dict[int, np.ndarray] = {}
        for n, mask in ((det.ngram, ~code[at : at + CHUNK]), (det.ngram_code, code[at : at + CHUNK])):
            groups[n] = groups.get(n, np.zeros(len(mask), dtype=bool)) | mask
        for n, mask in groups.items():
            sel = np.flatnonzero(mask)
            if len(sel):
                hits = index.table(n).hits(subset(toks, sel))
                hits[:, 0] = sel[hits[:, 0]] + at
                found.append(hits)
        if lsh is not None:
            lsh.insert_matrix(
                rensa.RMinHash.digest_matrix_from_token_byte_sets(byte_docs(shingles(toks)), NUM_PERM, 0),
                start_key=at,
            )
        if progress is not None:
            progress(chunk.height)
    ngram = np.concatenate(found) if found else np.zeros((0, 5), dtype=np.int64)
    rows: list[pl.DataFrame] = []
    # ngram: the share of the item's distinct n-grams the task holds
    share = ngram[:, 2] / np.maximum(ngram[:, 3], 1)
    if "ngram" in det.methods:
        ok = share >= det.ngram_share
        rows.append(_frame(ngram[ok, 0], ngram[ok, 1], "ngram", share[ok], det.ngram_share, ngram[ok, 4]))
    # minhash: query the task index with each item's sketch, keep pairs at or over the threshold
    mh_pairs = np.zeros((0, 2), dtype=np.int64)
    if lsh is not None:
        cand = [(t, e) for e, obj in index.minhashes for t in lsh.query(obj)]
        if cand:
            cand_arr = np.array(cand, dtype=np.int64)
            task_ids = np.unique(cand_arr[:, 0])
            sk = shingles(token_hashes(tasks["prompt"].gather(task_ids)))
            objs = dict(
                zip(
                    task_ids.tolist(),
                    rensa.RMinHash.from_token_sets(byte_docs(sk), NUM_PERM, 0),
                    strict=True,
                )
            )
            items = dict(index.minhashes)
            jac = np.array([objs[t].jaccard(items[e]) for t, e in cand])
            if "minhash" in det.methods:
                ok = jac >= det.jaccard
                rows.append(_frame(cand_arr[ok, 0], cand_arr[ok, 1], "minhash", jac[ok], det.jaccard, 2))
            mh_pairs = cand_arr
    # coverage, over every candidate pair of the other two
    if "coverage" in det.methods:
        pairs = np.unique(np.concatenate([ngram[:, :2], mh_pairs]), axis=0)
        if len(pairs):
            ids = np.unique(pairs[:, 0])
            local = np.column_stack([np.searchsorted(ids, pairs[:, 0]), pairs[:, 1]])
            cov = _coverage(token_hashes(tasks["prompt"].gather(ids)), index.toks, local, det.coverage_n)
            ok = cov >= det.coverage
            rows.append(_frame(pairs[ok, 0], pairs[ok, 1], "coverage", cov[ok], det.coverage, det.coverage_n))
    return _with_spans(tasks, index, pl.concat(rows) if rows else _frame([], [], "ngram", [], 0.0, 1))


_SCHEMA = {
    "task_idx": pl.Int64,
    "eval_idx": pl.Int64,
    "method": pl.String,
    "score": pl.Float64,
    "threshold": pl.Float64,
    "c": pl.Int64,
}


def _frame(task_idx, item_idx, method: str, score, threshold: float, c) -> pl.DataFrame:
    n = len(task_idx)
    return pl.DataFrame(
        {
            "task_idx": np.asarray(task_idx, dtype=np.int64),
            "eval_idx": np.asarray(item_idx, dtype=np.int64),
            "method": [method] * n,
            "score": np.asarray(score, dtype=np.float64),
            "threshold": [float(threshold)] * n,
            "c": np.broadcast_to(np.asarray(c, dtype=np.int64), (n,)).copy(),
        },
        schema=_SCHEMA,
    )


def _with_spans(tasks: pl.DataFrame, index: EvalIndex, rows: pl.DataFrame) -> pl.DataFrame:
    """Add each row's task_id and span (the matched text, in the task's normalised tokens)."""
    if not rows.height:
        return rows.with_columns(
            pl.lit(None, dtype=pl.String).alias("task_id"), pl.lit(None, dtype=pl.String).alias("span")
        ).drop("c")
    ids = np.unique(rows["task_idx"].to_numpy())
    prompts = tasks["prompt"].gather(ids)
    local = rows.select(
        pl.Series("t", np.searchsorted(ids, rows["task_idx"].to_numpy())), pl.col("eval_idx").alias("e"), "c"
    )
    spans = _spans(tokens(prompts), token_hashes(prompts), index.toks, local)
    return rows.with_columns(
        tasks["task_id"].gather(rows["task_idx"]).alias("task_id"), pl.Series("span", spans, dtype=pl.String)
    ).drop("c")
