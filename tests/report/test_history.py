"""The task-history page (rldata.report.history) from ledger rows written through the real store: tasks
named by their prompt, source and category, grouped by category, each with the query of its rows;
the movers' legend names tasks, not hashes; and the report pages render in headless Chromium with no
console error and every image a PNG."""

from __future__ import annotations

import base64
import hashlib
import io
import re
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from rldata.report.history import LIST_MAX, history_summary, mover_labels, render_history
from rldata.runs.core import record_run
from rldata.trainer.config import TrainConfig

SCRIPT = Path(__file__).resolve().parents[2] / "docs" / "img" / "screenshot.sh"
# pass counts of 4 samples per policy version 0..3: learned, forgotten, never learned, flat
PATTERNS = {"learned": [0, 1, 3, 4], "forgotten": [4, 3, 1, 0], "never": [0, 0, 1, 0], "flat": [2, 2, 2, 2]}


def _tid(i: int) -> str:
    return hashlib.sha256(f"task {i}".encode()).hexdigest()  # 64-hex ids, as the store's are


def fill_run(store, run_id="r1", per_pattern=3):
    """A training run's ledger rows: each task's pass counts per policy version, and its runs row."""
    tasks, rates, i = [], [], 0
    for name, counts in PATTERNS.items():
        for _ in range(per_pattern):
            t = _tid(i)
            tasks.append(
                {
                    "task_id": t,
                    "source": "arith" if i % 2 else "gsm8k",
                    "domain": "math",
                    "category": f"{name}-cat",
                    "prompt": f"What is {i} + {i}? Show <b>the</b> work & answer " + "x" * 100,
                    "answer": str(2 * i),
                }
            )
            for v, k in enumerate(counts):
                rates.append(
                    {
                        "task_id": t,
                        "model": f"base@1+{run_id}/v{v}",
                        "params_hash": "p",
                        "verifier_key": "math@1",
                        "n": 4,
                        "n_correct": k,
                        "n_error": 0,
                        "pass_rate": k / 4,
                        "run_id": run_id,
                    }
                )
            i += 1
    store.append("tasks", tasks)
    store.upsert("passrates", rates)
    # decay 0: each version's estimate is that version's counts alone, so the patterns cross the edges
    cfg = TrainConfig.from_dict({"steps": 3, "live": {"prior": "flat", "decay": 0.0}}).to_dict()
    with record_run(store, "train", {"config": cfg, "options": {}}, run_id=run_id):
        pass
    return tasks


def test_the_history_page_names_tasks_by_prompt_and_groups_them_by_category(store, tmp_path):
    tasks = fill_run(store)
    files = render_history(store, "r1", tmp_path)
    page = files["history_r1_html"].read_text()
    s = history_summary(store, "r1")
    assert s["classes"]["learned"] and s["classes"]["forgotten"] and s["classes"]["never_learned"]
    for cls in ("learned", "forgotten"):
        for t in s["classes"][cls]:
            row = next(r for r in tasks if r["task_id"] == t)
            short = row["prompt"][:40].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            assert short in page  # the prompt (escaped), not a wall of hashes
            assert f'id="task-{t[:24]}"' in page  # its row, which the movers' table links to
            assert f"task_id = &#x27;{t}&#x27;" in page  # the query that lists its rows
        assert f"<h4>{cls}-cat (3)</h4>" in page  # grouped by category
    assert "xxx…</td>" in page  # cut at 80 characters; the whole prompt is the cell's tooltip
    assert "<th>source</th>" in page and "<td>gsm8k</td>" in page
    assert "<b>the</b>" not in page  # a prompt is text, never markup
    labels = mover_labels(s)
    assert labels and all(not re.fullmatch(r"[0-9a-f]{8,}", x) for x in labels)
    assert all(x.startswith("What is ") and len(x) <= 32 for x in labels)
    assert LIST_MAX >= 3


def _png(data: bytes) -> tuple[int, int]:
    img = Image.open(io.BytesIO(data))
    img.verify()
    return img.size


@pytest.mark.slow  # headless Chromium takes a few seconds per page
@pytest.mark.skipif(
    not Path("/usr/bin/chromium").exists(),
    reason="/usr/bin/chromium is absent (Debian package chromium; .ci/setup installs it)",
)
def test_report_pages_render_in_headless_chromium_without_console_errors(store, tmp_path):
    from rldata.report.training import render_training
    from tests.report.test_training import _metrics

    fill_run(store)
    store.append("metrics", _metrics("r1", episodes=True, asynchronous=True))  # the same run's metrics
    files = render_training(store, ["r1"], tmp_path / "rep")
    for name in ("training_html", "history_r1_html"):
        page = files[name]
        png = tmp_path / f"{name}.png"
        r = subprocess.run(
            ["bash", str(SCRIPT), str(page), str(png)],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert r.returncode == 0, r.stderr
        assert "CONSOLE" not in r.stderr, r.stderr  # no JavaScript error, no console.error
        width, height = _png(png.read_bytes())
        assert (width, height) == (1150, 1500) and png.stat().st_size > 20_000
        srcs = re.findall(r'<img [^>]*src="([^"]+)"', r.stdout)
        assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)
        for s in srcs:  # every embedded image decodes: nothing the browser would show broken
            w, h = _png(base64.b64decode(s.split(",", 1)[1]))
            assert w > 100 and h > 100
    dom = subprocess.run(
        ["bash", str(SCRIPT), str(files["history_r1_html"]), str(tmp_path / "h.png")],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    ).stdout
    assert "What is 0 + 0? Show" in dom and "Tasks by class and category" in dom
