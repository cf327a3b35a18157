"""buckets.yaml: round-trip, stratify's defaults, and bad files giving errors that name file and key."""

from __future__ import annotations

import pytest

from rldata.curriculum import (
    Bucket,
    Curriculum,
    CurriculumError,
    Phase,
    Promotion,
    default_phases,
    load,
    save,
)
from rldata.errors import InputError

BUCKETS = (Bucket("easy", 0.7, 0.9, 3), Bucket("medium", 0.4, 0.7, 5), Bucket("hard", 0.1, 0.4, 5))

GOOD = """\
version: 1
selection: s1
seed: 3
sampler: mixture
buckets:
- {name: easy, low: 0.7, high: 0.9, count: 3}
- {name: medium, low: 0.4, high: 0.7}
- {name: hard, low: 0.1, high: 0.4}
phases:
- name: warmup
  until_step: 20
  weights: {easy: 0.6, medium: 0.4}
- name: main
  weights: {easy: 0.2, medium: 0.4, hard: 0.4}
  promote_when: {bucket: medium, metric: accuracy, window: 10, threshold: 0.6}
- name: hard
  weights: {hard: 1}
"""


def test_round_trip(tmp_path):
    cur = Curriculum(buckets=BUCKETS, phases=default_phases(BUCKETS), selection="s1", seed=11)
    path = save(cur, tmp_path / "buckets.yaml")
    back = load(path)
    assert back == cur
    assert save(back, tmp_path / "again.yaml").read_text() == path.read_text()


def test_hand_written_file_loads(tmp_path):
    p = tmp_path / "b.yaml"
    p.write_text(GOOD)
    cur = load(p)
    assert cur.selection == "s1" and cur.seed == 3 and cur.bucket_names == ["easy", "medium", "hard"]
    assert cur.phases[0].until_step == 20 and dict(cur.phases[0].weights) == {"easy": 0.6, "medium": 0.4}
    assert cur.phases[1].promote_when == Promotion("medium", 0.6, 10, "accuracy")
    assert load(save(cur, tmp_path / "c.yaml")) == cur


def test_default_phases_go_from_easy_to_hard():
    phases = default_phases(reversed(BUCKETS))  # order given does not matter: easiest (highest edge) first
    assert [p.name for p in phases] == ["easy", "medium", "hard"]
    for p in phases:
        assert abs(sum(p.weights.values()) - 1) < 1e-3
        assert max(p.weights, key=p.weights.get) == p.name  # each phase focuses its bucket
    assert phases[0].weights["hard"] == 0  # hard tasks wait for the model
    assert phases[0].promote_when == Promotion("easy", 0.9, 10) and phases[-1].promote_when is None
    # issue 12: without --phase-steps a phase waited for its promotion rule forever; now each is bounded
    assert [p.until_step for p in phases] == [33, 66, None]  # a default-length run (100 steps) reaches all
    assert [p.until_step for p in default_phases(BUCKETS, window=4, max_phase_steps=7)] == [7, 14, None]
    stepped = default_phases(BUCKETS, phase_steps=[50, 150])
    assert [p.until_step for p in stepped] == [50, 150, None] and all(p.promote_when is None for p in stepped)


def test_config_objects_are_frozen():
    p = Phase("a", {"easy": 1.0})
    with pytest.raises(TypeError):
        p.weights["easy"] = 2.0  # type: ignore[index]


def _edit(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new)


BAD = [
    (
        "unknown bucket",
        _edit("weights: {hard: 1}", "weights: {hrad: 1}"),
        "phases[2].weights.hrad",
        "unknown bucket 'hrad'",
    ),
    ("negative weight", _edit("hard: 0.4}", "hard: -0.4}"), "phases[1].weights.hard", "negative weight"),
    (
        "weights sum to 0",
        _edit("weights: {hard: 1}", "weights: {hard: 0}"),
        "phases[2].weights",
        "sum to more than 0",
    ),
    (
        "weight not a number",
        _edit("weights: {hard: 1}", "weights: {hard: lots}"),
        "phases[2].weights.hard",
        "must be a number",
    ),
    (
        "overlapping edges",
        _edit("{name: medium, low: 0.4, high: 0.7}", "{name: medium, low: 0.4, high: 0.75}"),
        "buckets[0]",
        "overlap",
    ),
    (
        "low above high",
        _edit("{name: hard, low: 0.1, high: 0.4}", "{name: hard, low: 0.4, high: 0.1}"),
        "buckets[2].high",
        "greater than low",
    ),
    (
        "edge out of range",
        _edit("low: 0.7, high: 0.9", "low: 0.7, high: 1.5"),
        "buckets[0].high",
        "in [0, 1]",
    ),
    (
        "duplicate bucket",
        _edit("{name: hard, low: 0.1, high: 0.4}", "{name: easy, low: 0.1, high: 0.4}"),
        "buckets[2].name",
        "duplicate",
    ),
    (
        "missing bucket field",
        _edit("{name: hard, low: 0.1, high: 0.4}", "{name: hard, low: 0.1}"),
        "buckets[2].high",
        "missing required key",
    ),
    ("missing phases", GOOD[: GOOD.index("phases:")], "phases", "missing required key"),
    ("missing weights", _edit("  weights: {hard: 1}\n", ""), "phases[2].weights", "missing required key"),
    ("unknown top key", GOOD + "extra: 1\n", "extra", "unknown key"),
    ("unknown phase key", _edit("  until_step: 20", "  until: 20"), "phases[0].until", "unknown key"),
    (
        "unknown promotion key",
        _edit("window: 10", "windw: 10"),
        "phases[1].promote_when.windw",
        "unknown key",
    ),
    (
        "promotion on unknown bucket",
        _edit("bucket: medium", "bucket: nope"),
        "phases[1].promote_when.bucket",
        "unknown bucket 'nope'",
    ),
    (
        "unknown metric",
        _edit("metric: accuracy", "metric: loss"),
        "phases[1].promote_when.metric",
        "unknown metric 'loss'",
    ),
    ("bad window", _edit("window: 10", "window: 0"), "phases[1].promote_when.window", ">= 1"),
    (
        "threshold above 1",
        _edit("threshold: 0.6", "threshold: 60"),
        "phases[1].promote_when.threshold",
        "in [0, 1]",
    ),
    (
        "steps not increasing",
        _edit("- name: hard\n", "- name: hard\n  until_step: 5\n"),
        "phases[2].until_step",
        "greater than the previous",
    ),
    ("duplicate phase", _edit("- name: hard\n", "- name: main\n"), "phases[2].name", "duplicate phase"),
    ("wrong version", _edit("version: 1", "version: 2"), "version", "unsupported version 2"),
    ("unknown sampler", _edit("sampler: mixture", "sampler: magic"), "sampler", "unknown sampler 'magic'"),
    (
        "buckets not a list",
        _edit(
            "buckets:\n- {name: easy, low: 0.7, high: 0.9, count: 3}\n- {name: medium, "
            "low: 0.4, high: 0.7}\n- {name: hard, low: 0.1, high: 0.4}\n",
            "buckets: easy\n",
        ),
        "buckets",
        "expected a list",
    ),
    (
        "bucket not a mapping",
        _edit("- {name: hard, low: 0.1, high: 0.4}", "- hard"),
        "buckets[2]",
        "expected a mapping",
    ),
    ("negative count", _edit("count: 3", "count: -3"), "buckets[0].count", "non-negative"),
]


@pytest.mark.parametrize(("text", "key", "reason"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_file_names_file_key_and_problem(tmp_path, text, key, reason):
    p = tmp_path / "buckets.yaml"
    p.write_text(text)
    with pytest.raises(InputError) as e:
        load(p)
    assert e.value.path == str(p) and e.value.where == key
    assert reason in e.value.reason
    assert str(e.value).startswith(f"{p}:{key}: ")


def test_unreadable_and_invalid_yaml(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        load(tmp_path / "missing.yaml")
    p = tmp_path / "b.yaml"
    p.write_text("buckets: [\n  {name: easy\n")
    with pytest.raises(InputError, match=r"b\.yaml:line \d+: invalid YAML"):
        load(p)
    p.write_text("")
    with pytest.raises(InputError, match="empty file"):
        load(p)
    p.write_text("- just\n- a list\n")
    with pytest.raises(InputError, match="expected a mapping"):
        load(p)


def test_direct_construction_validates_too():
    with pytest.raises(CurriculumError, match=r"phases\[0\]\.weights\.nope: unknown bucket"):
        Curriculum(buckets=BUCKETS, phases=(Phase("p", {"nope": 1.0}),))
    with pytest.raises(CurriculumError, match="at least one phase"):
        Curriculum(buckets=BUCKETS, phases=())


def test_a_file_without_edges_loads_and_an_old_one_with_edges_still_does(tmp_path):
    # stratify writes bucket names only (membership is the selection's bucket column); files written
    # before that carry low/high, which load (and validate) as before but decide nothing
    bare = GOOD
    for line in ("low: 0.7, high: 0.9, ", "low: 0.4, high: 0.7", "low: 0.1, high: 0.4"):
        bare = bare.replace(line, "")
    bare = bare.replace(", }", "}")
    assert "low" not in bare
    (tmp_path / "old.yaml").write_text(GOOD)
    (tmp_path / "bare.yaml").write_text(bare)
    old, new = load(tmp_path / "old.yaml"), load(tmp_path / "bare.yaml")
    assert old.bucket_names == new.bucket_names and old.phases == new.phases
    assert old.buckets[1] == Bucket("medium", 0.4, 0.7) and new.buckets[1] == Bucket("medium")
    assert (
        "low" not in save(new, tmp_path / "again.yaml").read_text() and load(tmp_path / "again.yaml") == new
    )
    with pytest.raises(CurriculumError, match="both edges or neither"):
        Bucket("easy", low=0.5)
    with pytest.raises(CurriculumError, match="default phases"):
        default_phases(new.buckets)


def test_default_phases_fit_a_default_length_run_and_late_phases_are_named():
    """The README tour trains 100 steps: the last (hard) phase must start within them (issue 29)."""
    from rldata.curriculum import DEFAULT_TRAIN_STEPS, late_phases
    from rldata.trainer.config import TrainConfig

    assert TrainConfig().steps == DEFAULT_TRAIN_STEPS
    for m in (1, 2, 3, 5):
        bs = [Bucket(f"b{i}", i / m, (i + 1) / m) for i in range(m)]
        cur = Curriculum(buckets=bs, phases=default_phases(bs))
        assert late_phases(cur, DEFAULT_TRAIN_STEPS) == [], m
        assert cur.phases[-1].until_step is None
    cur = Curriculum(buckets=BUCKETS, phases=default_phases(BUCKETS))
    assert late_phases(cur, 50) == ["hard"] and late_phases(cur, 66) == ["hard"]
    assert late_phases(cur, 67) == []
    cur = Curriculum(buckets=BUCKETS, phases=default_phases(BUCKETS, window=40))  # each phase >= window
    assert [p.until_step for p in cur.phases] == [40, 80, None]
