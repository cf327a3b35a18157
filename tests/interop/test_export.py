"""Exports to veRL, TRL, OpenRLHF, HF datasets and JSONL, each loaded back by its consumer."""

from __future__ import annotations

import json

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rldata.errors import RldataError
from rldata.interop import ExportConfig, export_selection, read_manifest
from rldata.interop.export import load_selection

# veRL's documented RL dataset layout (docs "Prepare Data for Post-Training"): one row per prompt.
VERL_REFERENCE = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        ("extra_info", pa.struct([("split", pa.string()), ("index", pa.int64())])),
    ]
)


def seed(store, *, n=6, selection="band"):
    """n arithmetic tasks; even ones kept (alternating buckets), odd ones dropped; one chat task."""
    tasks = [
        {
            "task_id": f"t{i:02d}",
            "source": "arith",
            "domain": "math",
            "category": "add/d1",
            "prompt": f"{i}+{i}=",
            "answer": str(2 * i),
        }
        for i in range(n)
    ]
    tasks[2]["messages"] = [
        {"role": "system", "content": "Answer with a number."},
        {"role": "user", "content": "2+2="},
    ]
    store.append("tasks", tasks)
    store.append(
        "selections",
        [
            {
                "selection": selection,
                "task_id": f"t{i:02d}",
                "decision": "keep" if i % 2 == 0 else "drop",
                "reason": "in_band" if i % 2 == 0 else "too_easy",
                "pass_rate": 0.25 + 0.05 * i,
                "n": 16,
                "n_correct": 4 + i,
                "bucket": "easy" if i % 4 == 0 else "hard",
                "model": "tiny-arith",
                "params_hash": "abc123",
                "verifier_key": "math@1",
                "passrates_version": 7,
                "params": json.dumps({"low": 0.1, "high": 0.9}),
            }
            for i in range(n)
        ],
    )
    return [f"t{i:02d}" for i in range(0, n, 2)]


def _types_compatible(ref: pa.DataType, got: pa.DataType) -> bool:
    """``got`` carries every field of ``ref`` with the same type (extra struct fields allowed)."""
    if pa.types.is_struct(ref):
        names = (
            {got.field(i).name: got.field(i).type for i in range(got.num_fields)}
            if pa.types.is_struct(got)
            else {}
        )
        return all(
            ref.field(i).name in names and _types_compatible(ref.field(i).type, names[ref.field(i).name])
            for i in range(ref.num_fields)
        )
    if pa.types.is_list(ref):
        return pa.types.is_list(got) and _types_compatible(ref.value_type, got.value_type)
    return ref.equals(got)


def test_verl_parquet_matches_the_reference_layout(store, tmp_path):
    kept = seed(store)
    m = export_selection(
        store, ExportConfig(selection="band", format="verl", data_source="openai/gsm8k", out=tmp_path / "v")
    )
    table = pq.read_table(tmp_path / "v" / "train.parquet")
    for f in VERL_REFERENCE:
        assert f.name in table.column_names
        assert _types_compatible(f.type, table.schema.field(f.name).type), f.name
    rows = table.to_pylist()
    assert [r["extra_info"]["task_id"] for r in rows] == kept
    assert [r["extra_info"]["index"] for r in rows] == [0, 1, 2]
    assert {r["extra_info"]["split"] for r in rows} == {"train"}
    assert {r["data_source"] for r in rows} == {"openai/gsm8k"}
    assert rows[0]["prompt"] == [{"role": "user", "content": "0+0="}]
    assert rows[1]["prompt"][0] == {
        "role": "system",
        "content": "Answer with a number.",
    }  # chat task kept whole
    assert rows[2]["reward_model"] == {
        "style": "rule",
        "ground_truth": "8",
    }  # a string, as veRL's scorers expect
    assert rows[0]["ability"] == "math"
    assert m["rows"] == 3 and m["files"][0]["path"] == "train.parquet"


def test_trl_export_loads_with_load_dataset_and_load_from_disk(store, tmp_path):
    kept = seed(store)
    out = tmp_path / "trl"
    export_selection(store, ExportConfig(selection="band", format="trl", out=out))
    dd = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "cache"))
    train = dd["train"]
    assert train.num_rows == 3
    assert train["task_id"] == kept
    assert train["prompt"] == ["0+0=", "2+2=", "4+4="]
    assert train["solution"] == ["0", "4", "8"]
    on_disk = datasets.load_from_disk(str(out / "dataset"))
    assert on_disk["solution"] == train["solution"]


def test_trl_messages_prompt_and_custom_answer_column(store, tmp_path):
    seed(store)
    spec = ExportConfig(
        out="out", selection="band", format="trl", prompt_style="messages", answer_column="ground_truth"
    )
    export_selection(store, spec.replace(out=tmp_path / "trl"))
    train = datasets.load_from_disk(str(tmp_path / "trl" / "dataset"))
    assert "ground_truth" in train.column_names and "solution" not in train.column_names
    assert train[0]["prompt"] == [{"role": "user", "content": "0+0="}]
    assert train[1]["prompt"][-1] == {"role": "user", "content": "2+2="}


def test_openrlhf_jsonl_uses_the_configured_keys(store, tmp_path):
    seed(store)
    export_selection(
        store,
        ExportConfig(
            selection="band", format="openrlhf", input_key="question", label_key="answer", out=tmp_path / "o"
        ),
    )
    lines = [json.loads(x) for x in (tmp_path / "o" / "train.jsonl").read_text().splitlines()]
    assert [x["question"] for x in lines] == ["0+0=", "2+2=", "4+4="]
    assert [x["answer"] for x in lines] == ["0", "4", "8"]
    ds = datasets.load_dataset(
        "json", data_files=str(tmp_path / "o" / "train.jsonl"), cache_dir=str(tmp_path / "cache")
    )["train"]
    assert ds["question"] == ["0+0=", "2+2=", "4+4="]


def test_hf_export_has_save_to_disk_and_parquet_shards(store, tmp_path):
    seed(store, n=10)
    out = tmp_path / "hf"
    m = export_selection(store, ExportConfig(selection="band", format="hf", shard_rows=2, out=out))
    shards = sorted(p.name for p in (out / "data").glob("*.parquet"))
    assert shards == [
        "train-00000-of-00003.parquet",
        "train-00001-of-00003.parquet",
        "train-00002-of-00003.parquet",
    ]
    assert sum(pq.read_metadata(out / "data" / s).num_rows for s in shards) == 5
    disk = datasets.load_from_disk(str(out / "dataset"))
    hub = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "cache"))["train"]
    assert disk["task_id"] == hub["task_id"] == ["t00", "t02", "t04", "t06", "t08"]
    assert hub["pass_rate"] == pytest.approx([0.25, 0.35, 0.45, 0.55, 0.65])
    assert {"prompt", "answer", "bucket", "messages", "domain"} <= set(hub.column_names)
    assert m["rows_by_bucket"] == {"easy": 3, "hard": 2}


def test_jsonl_one_task_per_line_and_bucket_filter(store, tmp_path):
    seed(store, n=10)
    export_selection(store, ExportConfig(selection="band", format="jsonl", bucket="hard", out=tmp_path / "j"))
    lines = [json.loads(x) for x in (tmp_path / "j" / "train.jsonl").read_text().splitlines()]
    assert [x["task_id"] for x in lines] == ["t02", "t06"]
    assert all(x["bucket"] == "hard" for x in lines)
    assert lines[0]["messages"][1] == {"role": "user", "content": "2+2="}


def test_unknown_selection_names_the_known_ones(store, tmp_path):
    seed(store)
    with pytest.raises(RldataError, match=r"unknown selection 'nope'; known selections: band"):
        export_selection(store, ExportConfig(selection="nope", format="jsonl", out=tmp_path / "x"))
    assert not (tmp_path / "x").exists()


def test_selection_that_keeps_nothing_fails(store, tmp_path):
    seed(store)
    store.append(
        "selections", [{"selection": "empty", "task_id": "t01", "decision": "drop", "reason": "too_easy"}]
    )
    with pytest.raises(RldataError, match="keeps no tasks"):
        export_selection(store, ExportConfig(selection="empty", format="verl", out=tmp_path / "x"))
    with pytest.raises(RldataError, match=r"no tasks in bucket 'mid'; buckets: easy, hard"):
        export_selection(
            store, ExportConfig(selection="band", format="verl", bucket="mid", out=tmp_path / "x")
        )
    assert not (tmp_path / "x").exists()


def test_kept_task_missing_from_tasks_fails(store, tmp_path):
    seed(store)
    store.append(
        "selections", [{"selection": "band", "task_id": "ghost", "decision": "keep", "reason": "in_band"}]
    )
    with pytest.raises(RldataError, match="missing from the tasks table, e.g. 'ghost'"):
        load_selection(store, selection="band")


def test_failed_export_leaves_the_previous_one_in_place(store, tmp_path):
    seed(store)
    out = tmp_path / "v"
    first = export_selection(store, ExportConfig(selection="band", format="verl", out=out))
    store.append(
        "tasks", [{"task_id": "t99", "source": "arith", "domain": "math", "prompt": "9+9="}]
    )  # no answer
    store.append(
        "selections", [{"selection": "band", "task_id": "t99", "decision": "keep", "reason": "in_band"}]
    )
    with pytest.raises(RldataError, match="'t99' has no answer or tests"):
        export_selection(store, ExportConfig(selection="band", format="verl", out=out))
    assert read_manifest(out)["content_hash"] == first["content_hash"]
    assert pq.read_metadata(out / "train.parquet").num_rows == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store", "v"]  # no temp directories left


def test_refuses_a_non_empty_directory_that_is_not_an_export(store, tmp_path):
    seed(store)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(RldataError, match="not empty"):
        export_selection(store, ExportConfig(selection="band", format="jsonl", out=tmp_path / "mine"))
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_spec_checks_its_fields():
    with pytest.raises(ValueError, match="unknown export format 'csv'; choices: verl"):
        ExportConfig(out="out", selection="s", format="csv")
    with pytest.raises(ValueError, match="prompt_style"):
        ExportConfig(out="out", selection="s", format="trl", prompt_style="chat")
    with pytest.raises(ValueError, match="must differ"):
        ExportConfig(out="out", selection="s", format="openrlhf", input_key="x", label_key="x")


def test_export_reads_selections_written_by_merge_and_predicate_overwrite(store, tmp_path):
    """Delta writes string_view columns on merges and predicate overwrites (what ingest and filter use)."""
    kept = seed(store)
    rows = store.read("selections").drop("created_at").to_dicts()
    store.overwrite("selections", rows, predicate="selection = 'band'")
    store.upsert("tasks", store.read("tasks").drop("created_at").to_dicts())
    export_selection(store, ExportConfig(selection="band", format="jsonl", out=tmp_path / "j"))
    lines = [json.loads(x) for x in (tmp_path / "j" / "train.jsonl").read_text().splitlines()]
    assert [x["task_id"] for x in lines] == kept


def _tiny_model_dir(tmp_path):
    """The bundled tiny model; while it is not built yet, a random-init model of the same architecture
    (same builder and tokenizer): the test checks data plumbing, not answer quality."""
    from pathlib import Path

    import rldata.sample_data as sd

    bundled = Path(sd.__file__).parent / "models" / "tiny-arith"
    if (bundled / "config.json").is_file():
        return bundled
    from rldata.jobs.pretrain_tiny import TinyConfig, TrainConfig, build_model, save

    out = tmp_path / "tiny-random"
    save(
        build_model(TinyConfig(), seed=0),
        out,
        model_cfg=TinyConfig(),
        train_cfg=TrainConfig(),
        seconds=0.0,
        final_loss=0.0,
    )
    return out


@pytest.mark.slow
def test_trl_grpo_trains_one_step_on_the_export_and_its_log_imports_back(store, tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    from rldata.interop import ImportConfig, import_rollouts

    seed(store)
    export_selection(store, ExportConfig(selection="band", format="trl", out=tmp_path / "trl"))
    train = datasets.load_dataset(str(tmp_path / "trl"), cache_dir=str(tmp_path / "cache"))["train"]
    truth = dict(zip(train["prompt"], train["solution"]))
    seen = []

    def exact_answer(prompts, completions, solution, **_):
        seen.extend(zip(prompts, solution))
        return [float(c.strip() == s) for c, s in zip(completions, solution)]

    args = GRPOConfig(
        output_dir=str(tmp_path / "run"),
        use_cpu=True,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=4,
        max_steps=1,
        report_to=[],
        logging_steps=1,
        log_completions=True,
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=str(_tiny_model_dir(tmp_path)), reward_funcs=exact_answer, args=args, train_dataset=train
    )
    trainer.train()
    assert trainer.state.global_step == 1
    assert len(seen) == 4 and all(truth[p] == s for p, s in seen)  # the reward read each prompt's own answer

    res = import_rollouts(store, ImportConfig(format="trl", model="tiny", path=tmp_path / "run"))
    assert (res.records, res.tasks_added, res.trajectories_added, res.verifications_added) == (4, 0, 4, 4)
    rows = store.sql(
        "SELECT t.prompt, t.task_id, t.step, v.layer FROM trajectories t JOIN verifications v USING (traj_id)"
    ).fetchall()
    by_prompt = dict(zip(store.read("tasks")["prompt"], store.read("tasks")["task_id"]))
    assert all(tid == by_prompt[p] and step == 1 and layer == "exact_answer" for p, tid, step, layer in rows)


@pytest.mark.parametrize("mode", ["on", "off"])
def test_prompts_follow_how_the_selection_was_measured(store, tmp_path, mode):
    """prompt_style auto (the default of trl and openrlhf): a slice sampled through the chat template
    exports chat messages, which TRL and OpenRLHF (--apply_chat_template) render with the same template;
    a slice sampled raw exports the raw prompt text.  The manifest says which."""
    from rldata.configs.sampling import SamplingSpec

    seed(store)
    spec = SamplingSpec(n=16, chat_template=mode)
    store.append(
        "trajectories",
        [
            {
                "traj_id": "x0",
                "task_id": "t00",
                "run_id": "r",
                "sample_idx": 0,
                "model": "tiny-arith",
                "policy_version": 0,
                "params_hash": "abc123",  # the selection's slice
                "sampling_params": spec.to_json(),
            }
        ],
    )
    for fmt in ("trl", "openrlhf"):
        m = export_selection(store, ExportConfig(selection="band", format=fmt, out=tmp_path / fmt))
        assert m["chat_template"] == mode
        if fmt == "trl":
            prompt = datasets.load_from_disk(str(tmp_path / fmt / "dataset"))[0]["prompt"]
        else:
            prompt = json.loads((tmp_path / fmt / "train.jsonl").read_text().splitlines()[0])["input"]
        assert isinstance(prompt, list if mode == "on" else str)
    # an explicit style wins
    m = export_selection(
        store,
        ExportConfig(selection="band", format="trl", options={"prompt_style": "text"}, out=tmp_path / "t"),
    )
    assert isinstance(datasets.load_from_disk(str(tmp_path / "t" / "dataset"))[0]["prompt"], str)
