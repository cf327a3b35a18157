"""``rldata audit``: how far one verifier agrees with another, or with stored labels.

Both sides are read from ``verifications``: a verifier (``NAME@VERSION``, or ``NAME`` when the
store holds one version of it) or ``labels``, the rewards stored by ``rldata import-rollouts``
(verifier ``imported:<format>``).  A trajectory's outcome on a side is the one rule the ledger
uses: error (None) if a layer errored, else whether every non-judge layer passed.  Only
trajectories with a result on both sides are compared.

Each disagreement gets one class, first match wins:

- ``timeout``: a side's error mentions a timeout;
- ``error``: a side errored otherwise (crash, bad gold);
- ``hedged``: a side's detail says ``reason: hedged`` (several distinct final answers);
- ``no_answer``: one side found no answer where the other did (or the audited verifier found none,
  against labels);
- ``format``: the sides read different answers out of the same completion (against labels: the
  gold is stated near the end of the completion, yet the verifier extracted something else);
- ``equivalence``: the same answer, judged equal to the gold on one side and not on the other.

Against labels, the labels are taken as the truth: false-positive rate = passed by the verifier
among label-negatives, false-negative rate = failed (errors count as failed, as in rewards) among
label-positives, each with a Wilson 95% interval.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from rldata.errors import ConfigError, RldataError
from rldata.sql_guard import check_predicate
from rldata.stats import wilson_interval

__all__ = [
    "CLASSES",
    "AuditResult",
    "add_to_report",
    "audit_store",
    "classify",
    "html_section",
    "print_audit",
]

CLASSES = ("timeout", "error", "hedged", "no_answer", "format", "equivalence")
LABELS = "labels"


@dataclass(frozen=True)
class AuditResult:
    verifier: str
    against: str
    compared: int
    only_verifier: int  # trajectories with a result from the audited verifier alone
    only_against: int
    agreement: pl.DataFrame  # scope (all | domain | source), value, n, agree, agreement
    classes: pl.DataFrame  # class, count, share (of the disagreements)
    examples: dict = field(default_factory=dict)  # class -> [ {traj_id, task_id, answer, ...} ]
    rates: dict | None = None  # against labels: fp/fn counts, rates and Wilson intervals

    def to_dict(self) -> dict:
        return {
            "verifier": self.verifier,
            "against": self.against,
            "compared": self.compared,
            "only_verifier": self.only_verifier,
            "only_against": self.only_against,
            "agreement": self.agreement.to_dicts(),
            "classes": self.classes.to_dicts(),
            "examples": self.examples,
            "rates": self.rates,
        }


def _side(store, spec: str) -> tuple[str, dict, str]:
    """SQL condition on ``verifications v`` for one side, its params, and its resolved name."""
    if spec == LABELS:
        return "v.verifier LIKE 'imported:%'", {}, LABELS
    name, _, version = spec.partition("@")
    if not version:
        got = [
            v
            for (v,) in store.sql(
                "SELECT DISTINCT verifier_version FROM verifications WHERE verifier = $1 ORDER BY 1",
                params=[name],
            ).fetchall()
        ]
        if not got:
            known = [
                v for (v,) in store.sql("SELECT DISTINCT verifier FROM verifications ORDER BY 1").fetchall()
            ]
            raise RldataError(
                f"no verifications from {name!r}; verifiers: {', '.join(known) or '(none)'} (or {LABELS!r})"
            )
        if len(got) > 1:
            raise RldataError(
                f"{name!r} has several versions, name one: {', '.join(f'{name}@{v}' for v in got)}"
            )
        version = got[0]
    return "v.verifier = $n AND v.verifier_version = $ver", {"n": name, "ver": version}, f"{name}@{version}"


def _outcomes(store, cond: str, params: dict, *, run_id: str | None, where: str | None) -> pl.DataFrame:
    conds = [cond, "v.layer <> 'judge'"]
    if run_id:
        conds.append("t.run_id = $run")
        params = {**params, "run": run_id}
    if where:
        conds.append(f"({where})")
    q = f"""
        SELECT v.traj_id, any_value(v.task_id) AS task_id, any_value(k.domain) AS domain,
               any_value(k.source) AS source, any_value(k.answer) AS answer, any_value(t.completion) AS completion,
               CASE WHEN bool_or(v.passed IS NULL) THEN NULL ELSE bool_and(v.passed) END AS passed,
               max(v.extracted) AS extracted, string_agg(v.error, '; ') AS error, list(v.detail) AS details
        FROM verifications v JOIN trajectories t USING (traj_id) JOIN tasks k ON k.task_id = t.task_id
        WHERE {" AND ".join(conds)} GROUP BY v.traj_id"""
    try:
        return store.sql(q, params=params).pl()
    except Exception as e:
        if not where:
            raise
        raise ConfigError(f"where {where!r}: {str(e).splitlines()[0]}", field="where") from None


def _reasons(details) -> set[str]:
    """``reason`` values of a side's JSON details; anything unparsable is ignored (read defensively)."""
    out = set()
    for d in details or []:
        try:
            obj = json.loads(d) if d else None
        except (TypeError, ValueError):
            continue
        if isinstance(obj, dict) and isinstance(obj.get("reason"), str):
            out.add(obj["reason"])
    return out


_BOXED = re.compile(r"\\boxed\s*\{(.*)\}", re.DOTALL)


def _norm(text: str | None) -> str:
    s = (text or "").strip()
    m = _BOXED.search(s)
    s = m.group(1) if m else s
    return re.sub(r"[\s$]|\\[,!;: ]|\.$", "", s).lower()


def classify(a: dict, b: dict | None) -> str:
    """The class of one disagreement; ``b`` None means the reference is a label (no extraction)."""
    errs = " ".join(x for x in (a.get("error"), (b or {}).get("error")) if x).lower()
    if "timeout" in errs or "timed out" in errs:
        return "timeout"
    if a.get("passed") is None or (b is not None and b.get("passed") is None):
        return "error"
    if "hedged" in _reasons(a.get("details")) | _reasons((b or {}).get("details")):
        return "hedged"
    if b is None:
        if a.get("extracted") is None:
            return "no_answer"
        gold = _norm(a.get("answer"))
        tail = _norm((a.get("completion") or "")[-200:])
        if not a.get("passed") and gold and gold in tail and _norm(a["extracted"]) != gold:
            return "format"
        return "equivalence"
    if (a.get("extracted") is None) != (b.get("extracted") is None):
        return "no_answer"
    if _norm(a.get("extracted")) != _norm(b.get("extracted")):
        return "format"
    return "equivalence"


def _agreement(df: pl.DataFrame) -> pl.DataFrame:
    parts = []
    for scope, col in (("all", None), ("domain", "domain"), ("source", "source")):
        keys = [
            pl.lit(scope).alias("scope"),
            (pl.lit("all") if col is None else pl.col(col).fill_null("(none)"))
            .cast(pl.String)
            .alias("value"),
        ]
        g = df.group_by(keys).agg(pl.len().alias("n"), pl.col("agree").sum().alias("agree"))
        parts.append(g.sort("value"))
    out = pl.concat(parts)
    return out.with_columns((pl.col("agree") / pl.col("n")).alias("agreement"))


def _rates(df: pl.DataFrame) -> dict:
    a = df["passed_a"].fill_null(False)  # a verifier error scores as a wrong answer
    lab = df["passed_b"]
    tp, fp = int((a & lab).sum()), int((a & ~lab).sum())
    fn, tn = int((~a & lab).sum()), int((~a & ~lab).sum())
    out = {"tp": tp, "fp": fp, "fn": fn, "tn": tn}
    for name, k, n in (("fp_rate", fp, fp + tn), ("fn_rate", fn, fn + tp)):
        out[name] = k / n if n else None
        out[f"{name}_ci"] = list(wilson_interval(k, n)) if n else None
    return out


def audit_store(
    store,
    *,
    verifier: str,
    against: str,
    run_id: str | None = None,
    where: str | None = None,
    examples: int = 3,
) -> AuditResult:
    """Compare ``verifier`` with ``against`` (another verifier or ``labels``) on the trajectories
    both have scored (optionally one run's, or those matching ``where``)."""
    if verifier == LABELS:
        raise ConfigError("verifier names the verifier audited; labels go in against", field="verifier")
    if where is not None:  # spliced into SQL: one predicate
        check_predicate(where)
    ca, pa_, name_a = _side(store, verifier)
    cb, pb, name_b = _side(store, against)
    pb = {f"{k}_b": v for k, v in pb.items()}
    cb = re.sub(r"\$(n|ver)\b", r"$\1_b", cb)
    a = _outcomes(store, ca, pa_, run_id=run_id, where=where)
    b = _outcomes(store, cb, pb, run_id=run_id, where=where)
    both = a.join(
        b.select(
            "traj_id", *[pl.col(c).alias(f"{c}_b") for c in ("passed", "extracted", "error", "details")]
        ),
        on="traj_id",
        how="inner",
    )
    if both.height == 0:
        raise RldataError(f"no trajectories scored by both {name_a} ({a.height}) and {name_b} ({b.height})")
    both = both.rename({"passed": "passed_a"}).with_columns(
        (pl.col("passed_a").eq_missing(pl.col("passed_b"))).alias("agree")
    )
    labels = name_b == LABELS
    rows = both.to_dicts()
    for r in rows:
        r["class"] = (
            None
            if r["agree"]
            else classify(
                {**r, "passed": r["passed_a"]},
                None
                if labels
                else {
                    "passed": r["passed_b"],
                    "extracted": r["extracted_b"],
                    "error": r["error_b"],
                    "details": r["details_b"],
                },
            )
        )
    classes = pl.DataFrame({"class": [r["class"] for r in rows if r["class"]]}, schema={"class": pl.String})
    counts = dict(classes.group_by("class").len().iter_rows()) if classes.height else {}
    n_dis = max(1, sum(counts.values()))
    class_df = pl.DataFrame(
        {"class": list(CLASSES), "count": [counts.get(c, 0) for c in CLASSES]},
        schema={"class": pl.String, "count": pl.Int64},
    ).with_columns((pl.col("count") / n_dis).alias("share"))
    ex: dict[str, list] = {}
    for r in sorted((r for r in rows if r["class"]), key=lambda r: r["traj_id"]):
        if len(ex.setdefault(r["class"], [])) < examples:
            ex[r["class"]].append(
                {
                    "traj_id": r["traj_id"],
                    "task_id": r["task_id"],
                    "domain": r["domain"],
                    "gold": r["answer"],
                    "verifier": {"passed": r["passed_a"], "extracted": r["extracted"], "error": r["error"]},
                    "against": {
                        "passed": r["passed_b"],
                        "extracted": r["extracted_b"],
                        "error": r["error_b"],
                    },
                    "completion_tail": (r["completion"] or "")[-160:],
                }
            )
    return AuditResult(
        verifier=name_a,
        against=name_b,
        compared=both.height,
        only_verifier=a.join(b, on="traj_id", how="anti").height,
        only_against=b.join(a, on="traj_id", how="anti").height,
        agreement=_agreement(both),
        classes=class_df,
        examples=ex,
        rates=_rates(both) if labels else None,
    )


def print_audit(res: AuditResult) -> None:
    """The audit as tables on stdout (data), for a terminal."""
    from rich.console import Console
    from rich.table import Table

    con = Console()
    con.print(
        f"audit of [bold]{res.verifier}[/] against [bold]{res.against}[/]: {res.compared} trajectories "
        f"compared ({res.only_verifier} only in {res.verifier}, {res.only_against} only in {res.against})"
    )
    for title, df in (("agreement", res.agreement), ("disagreements by class", res.classes)):
        t = Table(title=title, show_edge=False, header_style="bold")
        for c in df.columns:
            t.add_column(c)
        for row in df.iter_rows():
            t.add_row(*[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row])
        con.print(t)
    if res.rates:
        r = res.rates
        for k in ("fp_rate", "fn_rate"):
            if r[k] is not None:
                lo, hi = r[f"{k}_ci"]
                con.print(f"{k.replace('_', ' ')}: {r[k]:.3f} (95% CI {lo:.3f}-{hi:.3f})")
        con.print(f"tp {r['tp']}, fp {r['fp']}, fn {r['fn']}, tn {r['tn']}")
    for cls, items in res.examples.items():
        for e in items:
            con.print(
                f"[dim]{cls}[/] {e['traj_id']}: gold {e['gold']!r}, {res.verifier} {e['verifier']}, "
                f"{res.against} {e['against']}",
                markup=False,
                highlight=False,
            )


def html_section(res: AuditResult) -> str:
    """The audit as an HTML section for ``rldata report``."""

    def table(df: pl.DataFrame) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in df.columns)
        body = "".join(
            "<tr>"
            + "".join(f"<td>{html.escape(f'{v:.3g}' if isinstance(v, float) else str(v))}</td>" for v in r)
            + "</tr>"
            for r in df.iter_rows()
        )
        return f"<table><tr>{head}</tr>{body}</table>"

    rates = ""
    if res.rates:
        r = res.rates
        rates = (
            "<p>"
            + ", ".join(
                f"{k.replace('_', ' ')} {r[k]:.3f}" for k in ("fp_rate", "fn_rate") if r[k] is not None
            )
            + f" (tp {r['tp']}, fp {r['fp']}, fn {r['fn']}, tn {r['tn']})</p>"
        )
    ex = "".join(
        f"<li><b>{html.escape(c)}</b> {html.escape(e['traj_id'])}: gold {html.escape(repr(e['gold']))}, "
        f"{html.escape(json.dumps(e['verifier'], default=str))} vs {html.escape(json.dumps(e['against'], default=str))}</li>"
        for c, items in res.examples.items()
        for e in items
    )
    return (
        f'<section id="audit"><h2>Verifier audit: <code>{html.escape(res.verifier)}</code> against '
        f"<code>{html.escape(res.against)}</code></h2><p>{res.compared} trajectories compared.</p>"
        f"{table(res.agreement)}<h3>Disagreements</h3>{table(res.classes)}{rates}"
        f"{f'<ul>{ex}</ul>' if ex else ''}</section>"
    )


def add_to_report(html_path: str | Path, res: AuditResult) -> Path:
    """Insert the audit section into a written report page (before ``</body>``)."""
    path = Path(html_path)
    page = path.read_text()
    cut = page.rfind("</body>")
    path.write_text(
        page[:cut] + html_section(res) + "\n" + page[cut:] if cut >= 0 else page + html_section(res)
    )
    return path
