"""The report's training page from metrics rows written through the real store: one PNG per family,
runs overlaid, seeds grouped by tag (mean and band), "no data" panels, and the CLI around it.
(tests/trainer/test_train_report.py goes from a real training run to the PNGs.)  The page is also
screenshot with headless Chromium (docs/img/screenshot.sh) and checked for its plot titles."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from rldata.cli import main
from rldata.report.training import FAMILIES, load_curves, render_training
from rldata.runs.core import record_run

TIMES = ("generate", "reward", "update", "sync", "writeback")


def _metrics(run_id, *, offset=0.0, steps=6, episodes=False, asynchronous=False) -> list[dict]:
    rows = []
    for step in range(1, steps + 1):
        m = {
            "reward_mean": 0.2 + 0.05 * step + offset,
            "accuracy": 0.2 + 0.04 * step,
            "groups_kept": 3,
            "groups_dropped": 1,
            "groups_dropped/zero_variance": 1,
            "kl": 0.01 * step,
            "entropy": 1.0,
            "clip_frac": 0.1,
            "response_len_mean": 5 + step,
            "accuracy/easy": 0.5,
            "accuracy/hard": 0.1,
            "phase": 0 if step < 4 else 1,
            **{f"time/{p}": 0.5 for p in TIMES},
        }
        if episodes:
            m |= {
                "episode/tool_calls_mean": 1.0 + step / 10,
                "episode/tool_errors_mean": 0.2,
                "episode/turns_mean": 2.0,
                "episode/finish/env_done": 0.8,
                "episode/finish/max_turns": 0.2,
            }
        if asynchronous:
            m |= {
                "staleness/0": 8.0 * (step % 2),
                "staleness/1": 8.0 * (1 - step % 2),
                "rho_mean": 1.0,
                "rho_max": 1.3,
                "tis_frac": 0.01,
                "clip_or_tis_frac": 0.11,
            }
        rows += [{"run_id": run_id, "step": step, "name": k, "value": float(v)} for k, v in m.items()]
    for s in (0, steps):
        rows += [
            {"run_id": run_id, "step": s, "name": "eval/accuracy", "value": 0.3 + offset},
            {"run_id": run_id, "step": s, "name": "eval/ci_low", "value": 0.25 + offset},
            {"run_id": run_id, "step": s, "name": "eval/ci_high", "value": 0.35 + offset},
        ]
    return rows


def _run(store, run_id, *, tag=None, offset=0.0, steps=6, metrics=True, **kinds):
    with record_run(store, "train", {"options": {"tag": tag}}, run_id=run_id) as run:
        if metrics:
            store.append("metrics", _metrics(run_id, offset=offset, steps=steps, **kinds))
        run.summary = {"last_step": steps, "evals": [{"accuracy": 0.3}, {"accuracy": 0.3 + offset}]}


def test_group_by_tag_averages_the_seeds_and_keeps_the_band(store):
    _run(store, "s1", tag="cur", offset=0.0)
    _run(store, "s2", tag="cur", offset=0.2)
    _run(store, "u1", tag=None, offset=-0.1)
    curves, runs = load_curves(store, ["s1", "s2", "u1"], group_by="tag")
    assert set(curves["series"].cast(str).to_list()) == {"cur", "u1"}  # an untagged run is its own series
    r = curves.filter((curves["series"] == "cur") & (curves["name"] == "reward_mean") & (curves["step"] == 2))
    assert r["runs"].item() == 2 and r["mean"].item() == pytest.approx(0.4)
    assert (r["lo"].item(), r["hi"].item()) == pytest.approx((0.3, 0.5))
    assert dict(runs.select("run_id", "tag").iter_rows())["s1"] == "cur"
    by_run, _ = load_curves(store, ["s1", "s2"])
    assert set(by_run["series"].cast(str).to_list()) == {"s1", "s2"} and by_run["runs"].max() == 1


def test_every_family_is_a_png_and_the_page_names_them(store, tmp_path):
    _run(store, "a")
    _run(store, "b", offset=0.1)
    files = render_training(store, ["a", "b"], tmp_path / "rep")
    for name in FAMILIES:
        png = files[name].read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 5000, name
    page = files["training_html"].read_text()
    for title in (
        "Reward and accuracy",
        "Held-out accuracy",
        "Kept and dropped groups",
        "KL, entropy and clip fraction",
        "Response length",
        "Per-bucket accuracy",
        "Time per phase",
    ):
        assert title in page, title
    assert "<td>a</td>" in page and "<td>b</td>" in page


def test_episode_async_and_interval_panels_and_whole_steps(store, tmp_path):
    import matplotlib.pyplot as plt

    from rldata.report.training import _heldout, _reward, load_curves

    _run(store, "a", episodes=True, asynchronous=True)
    files = render_training(store, ["a"], tmp_path / "rep")
    page = files["training_html"].read_text()
    for title in (
        "Episodes: tool calls, tool errors, turns, finish reasons",
        "Async: staleness, rho and clip statistics",
        "Held-out accuracy (bars: 95% interval over the tasks)",
    ):
        assert title in page, title
    assert files["train_episodes"].stat().st_size > 5000 and files["train_async"].stat().st_size > 5000
    assert "moves to a harder bucket" not in page  # the run has a held-out evaluation
    curves, _ = load_curves(store, ["a"])
    two = curves.filter(curves["step"] <= 2)  # a 2-step run: ticks 1, 2 (never 1.2, 1.4, ...)
    fig, ax = plt.subplots()
    _reward(two, fig, ax)
    ticks = [t for t in ax.get_xticks() if 1 <= t <= 2]
    assert ticks and all(float(t).is_integer() for t in ticks)
    fig, ax = plt.subplots()
    assert _heldout(curves, fig, ax).endswith("(bars: 95% interval over the tasks)")
    plt.close("all")


def test_a_run_without_eval_says_why_its_reward_falls_at_a_phase_change(store, tmp_path):
    with record_run(store, "train", {}, run_id="a"):
        store.append("metrics", [r for r in _metrics("a") if not r["name"].startswith("eval/")])
    page = render_training(store, ["a"], tmp_path / "rep")["training_html"].read_text()
    assert "moves to a harder bucket (dashed lines) they fall even if the policy improves" in page
    assert "--eval-heldout" in page


def test_a_run_without_metrics_draws_no_data_panels(store, tmp_path):
    _run(store, "empty", metrics=False)
    files = render_training(store, ["empty"], tmp_path / "rep")
    assert all(files[n].exists() for n in FAMILIES)
    with pytest.raises(Exception, match="nope"):
        render_training(store, ["empty", "nope"], tmp_path / "rep2")


def _cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_report_run_cli_without_a_selection_writes_the_training_page(store, tmp_path, capsys):
    _run(store, "a", tag="t")
    _run(store, "b", tag="t", offset=0.1)
    out_dir = tmp_path / "rep"
    code, out, err = _cli(
        capsys,
        "--store",
        store.root,
        "report",
        "-o",
        str(out_dir),
        "--run",
        "a",
        "--run",
        "b",
        "--group-by",
        "tag",
    )
    assert code == 0, err
    assert out.strip().endswith("training.html") and (out_dir / "train_buckets.png").exists()
    assert "mean, band" in (out_dir / "training.html").read_text()
    code, _, err = _cli(
        capsys, "--store", store.root, "report", "-o", str(out_dir), "--run", "a", "--group-by", "x"
    )
    assert code == 1 and "--group-by" in err and err.count("\n") == 1
    code, _, err = _cli(capsys, "--store", store.root, "report", "-o", str(out_dir), "--run", "zzz")
    assert code == 1 and "zzz" in err


def test_runs_cli_lists_runs_with_headlines(store, capsys):
    _run(store, "a")
    _run(store, "b", offset=0.1)
    code, out, err = _cli(capsys, "--store", store.root, "runs", "--format", "json")
    assert code == 0, err
    rows = json.loads(out)
    assert [r["run_id"] for r in rows] == ["b", "a"]  # newest first
    assert rows[0]["kind"] == "train" and rows[0]["status"] == "done" and rows[0]["steps"] == "6"
    assert rows[0]["heldout"] == "0.300 -> 0.400" and rows[0]["duration_s"] >= 0
    code, out, _ = _cli(capsys, "--store", store.root, "runs", "--format", "csv", "--limit", "1")
    assert code == 0 and out.splitlines()[0].startswith("run_id,kind,status,started_at,duration_s")
    assert len(out.splitlines()) == 2
    code, out, _ = _cli(capsys, "--store", store.root, "runs", "--kind", "sample", "--format", "json")
    assert code == 0 and json.loads(out) == []


@pytest.mark.slow  # headless Chromium takes a few seconds per page
@pytest.mark.skipif(
    not Path("/usr/bin/chromium").exists(),
    reason="/usr/bin/chromium is absent (Debian package chromium; .ci/setup installs it)",
)
def test_training_page_screenshot_in_headless_chromium(store, tmp_path):
    _run(store, "a", tag="t")
    _run(store, "b", tag="t", offset=0.1)
    files = render_training(store, ["a", "b"], tmp_path / "rep", group_by="tag")
    script = Path(__file__).resolve().parents[2] / "docs" / "img" / "screenshot.sh"
    png = tmp_path / "page.png"
    dom = subprocess.run(
        ["bash", str(script), str(files["training_html"]), str(png)],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    ).stdout
    for title in (
        "Reward and accuracy",
        "Held-out accuracy",
        "Kept and dropped groups",
        "KL, entropy and clip fraction",
        "Response length",
        "Per-bucket accuracy",
        "Time per phase",
    ):
        assert f"<figcaption>{title}" in dom, title
    head = png.read_bytes()[:24]
    width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    assert head.startswith(b"\x89PNG") and (width, height) == (1150, 1500) and png.stat().st_size > 50_000
