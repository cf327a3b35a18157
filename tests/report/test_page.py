"""rldata.report.overview and rldata.report: the numbers behind stats, and plots that really render."""

from __future__ import annotations

import base64
import io
import re

import pytest
from PIL import Image

from rldata.errors import RldataError
from rldata.ledger.select import Band, filter_store, parse_buckets, stratify_store
from rldata.report.overview import gather
from rldata.report.page import PLOTS, histogram_title, render


def _fill(store, *, trajectories=True):
    counts = [0] * 6 + list(range(17)) + [16] * 3  # the mirrored J: many 0/16, some 16/16
    store.append(
        "tasks",
        [
            {
                "task_id": f"t{i}",
                "source": "s",
                "domain": "math",
                "prompt": "q",
                "category": "add" if i % 2 else "mul",
            }
            for i in range(len(counts) + 1)
        ],
    )
    store.upsert(
        "passrates",
        [
            {
                "task_id": f"t{i}",
                "model": "m",
                "params_hash": "p",
                "verifier_key": "math@1",
                "n": 16,
                "n_correct": k,
                "n_error": 0,
                "pass_rate": k / 16,
            }
            for i, k in enumerate(counts)
        ],
    )
    if trajectories:
        store.append(
            "trajectories",
            [
                {
                    "traj_id": f"t{i}/{j}",
                    "task_id": f"t{i}",
                    "run_id": "r",
                    "sample_idx": j,
                    "model": "m",
                    "policy_version": 0,
                    "params_hash": "p",
                    "completion_tokens": 10 * (1 + i % 2),
                }
                for i in range(len(counts))
                for j in range(16)
            ],
        )
    filter_store(store, name="s", band=Band(0.1, 0.9))
    stratify_store(store, selection="s", buckets=parse_buckets("easy:0.7-0.9,medium:0.4-0.7,hard:0.1-0.4"))
    return counts


def test_overview_numbers(store):
    counts = _fill(store)
    ov = gather(store)
    hist = {r["label"]: (r["tasks"], r["kept"]) for r in ov.histogram.to_dicts()}
    assert len(hist) == 17 and hist["0/16"] == (7, 0) and hist["16/16"] == (4, 0) and hist["8/16"] == (1, 1)
    assert ov.total == len(counts) + 1 and ov.kept == 13  # +1: the task without samples
    assert histogram_title(ov) == f"Pass rates of {len(counts)} sampled tasks (of {len(counts) + 1}), m"
    assert ov.summary()["reasons"]["not_sampled"] == 1
    assert dict(ov.buckets.select("bucket", "tasks").iter_rows()) == {"easy": 3, "medium": 5, "hard": 5}
    s = ov.savings
    dropped = [i for i, k in enumerate(counts) if not 2 <= k <= 14]
    assert s.dropped_tasks == len(dropped) and s.source == "measured" and s.group_size == 16
    assert s.saved_tokens == 16 * sum(10 * (1 + i % 2) for i in dropped)
    kept = [i for i, k in enumerate(counts) if 2 <= k <= 14]
    assert s.kept_tokens == 16 * sum(10 * (1 + i % 2) for i in kept)
    assert s.saved_fraction == pytest.approx(s.saved_tokens / (s.saved_tokens + s.kept_tokens))


def test_savings_estimated_or_unknown_without_trajectories(store):
    counts = _fill(store, trajectories=False)
    dropped = sum(1 for k in counts if not 2 <= k <= 14)
    assert gather(store).savings.saved_tokens is None
    s = gather(store, tokens_per_sample=100, group_size=8).savings
    assert s.source == "estimated" and s.saved_tokens == dropped * 8 * 100


def test_selection_must_be_named_when_several(store):
    with pytest.raises(RldataError, match="no selections"):
        gather(store)
    _fill(store)
    filter_store(store, name="other", band=Band(0.2, 0.8))
    with pytest.raises(RldataError, match="several selections.*other, s"):
        gather(store)
    assert gather(store, "other").selection == "other"


def _non_white_fraction(img: Image.Image) -> float:
    colors = img.convert("RGB").getcolors(maxcolors=1 << 24)
    white = sum(c for c, rgb in colors if rgb == (255, 255, 255))
    return 1 - white / (img.size[0] * img.size[1])


@pytest.mark.slow  # matplotlib renders four figures
def test_report_plots_render_and_html_embeds_them(store, tmp_path):
    _fill(store)
    files = render(gather(store), tmp_path / "rep")
    assert set(files) == {*PLOTS, "html"}
    for name in PLOTS:
        img = Image.open(files[name])
        img.load()
        assert img.format == "PNG" and img.size[0] > 500 and img.size[1] > 300
        assert _non_white_fraction(img) > 0.02, name  # something was drawn
    hist = Image.open(files["histogram"]).convert("RGB")
    assert (0x2B, 0x8A, 0x3E) in {rgb for _, rgb in hist.getcolors(maxcolors=1 << 24)}  # the kept bars' green
    page = files["html"].read_text()
    embedded = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(embedded) == len(PLOTS)
    for b64 in embedded:
        Image.open(io.BytesIO(base64.b64decode(b64))).verify()
    assert "<code>s</code>" in page and 'src="http' not in page  # self-contained
    assert "<th>kept</th><td>13 (48.1%)</td>" in page


def test_histogram_bins_by_count_for_one_n_else_by_rate():
    import polars as pl

    from rldata.report.overview import histogram

    one_n = pl.DataFrame(
        {
            "n": [4, 4, 4, 0],
            "n_correct": [0, 4, 4, 0],
            "pass_rate": [0.0, 1.0, 1.0, None],
            "decision": ["drop", "drop", "drop", "drop"],
        }
    )
    h = histogram(one_n)
    assert h["label"].to_list() == ["0/4", "1/4", "2/4", "3/4", "4/4"] and h["tasks"].to_list() == [
        1,
        0,
        0,
        0,
        2,
    ]
    mixed = pl.DataFrame(
        {
            "n": [4, 8, 8],
            "n_correct": [2, 8, 1],
            "pass_rate": [0.5, 1.0, 0.125],
            "decision": ["keep", "drop", "keep"],
        }
    )
    h = histogram(mixed)
    assert h.height == 20 and h["tasks"].sum() == 3 and h["kept"].sum() == 2
    by_label = dict(zip(h["label"], h["tasks"], strict=True))
    assert (
        by_label["0.5-0.55"] == 1 and by_label["0.95-1.0"] == 1 and by_label["0.1-0.15"] == 1
    )  # 1.0 in the top bin
