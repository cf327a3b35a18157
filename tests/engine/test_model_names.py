"""``--model`` as a newcomer types it: a bundled model by its name, a typo of one, a LoRA adapter
directory (rldata.engine.core.model_identity, the one place every command resolves --model)."""

from __future__ import annotations

import shutil

import pytest

from rldata import open_store
from rldata.cli import main
from rldata.engine.core import BUNDLED_MODELS, chat_model_path, default_model_path, model_identity
from rldata.errors import RldataError


def test_a_bundled_model_is_accepted_by_its_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no directory of that name here
    assert model_identity("tiny-arith") == model_identity(None)
    chat = model_identity("tiny-arith-chat")
    assert chat == model_identity(str(chat_model_path()))
    assert chat.name.startswith("tiny-arith-chat@")  # the ledger name the demo records for it
    assert BUNDLED_MODELS == ("tiny-arith", "tiny-arith-chat")


def test_a_directory_of_that_name_wins_over_the_bundled_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(default_model_path(), tmp_path / "tiny-arith-chat")
    ident = model_identity("tiny-arith-chat")
    assert ident.path == "tiny-arith-chat" and ident.name.startswith("tiny-arith-chat@")
    assert ident.revision == model_identity(None).revision  # the copy's weights, not the chat model's


def test_an_unknown_name_lists_the_bundled_models_and_where_they_are(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RldataError) as e:
        model_identity("tiny-arith-chatt")
    msg = str(e.value)
    assert "did you mean the bundled model tiny-arith-chat?" in msg
    assert "tiny-arith, tiny-arith-chat" in msg and str(default_model_path().parent) in msg
    assert e.value.field == "model"
    with pytest.raises(RldataError, match="not a model directory") as e:
        model_identity(str(tmp_path / "elsewhere"))
    assert "did you mean" not in str(e.value) and "tiny-arith-chat" in str(e.value)


def test_the_cli_says_it_in_one_line_naming_the_option(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    st = open_store(tmp_path / "s")
    st.append("tasks", [{"task_id": "t", "source": "u", "domain": "math", "prompt": "1+1=", "answer": "2"}])
    code = main(["--store", st.root, "sample", "--model", "tiny-arith-chatt"])
    out, err = capsys.readouterr()
    assert code == 1 and out == "" and err.count("\n") == 1
    assert err.startswith("rldata: error: --model: model tiny-arith-chatt")
    assert "did you mean the bundled model tiny-arith-chat?" in err


def _adapter(path):
    path.mkdir(parents=True)
    (path / "adapter_config.json").write_text('{"peft_type": "LORA", "r": 8}')
    (path / "adapter_model.safetensors").write_bytes(b"w")
    return path


def test_a_lora_adapter_directory_suggests_export_model_merged(tmp_path):
    with pytest.raises(RldataError) as e:
        model_identity(str(_adapter(tmp_path / "my-adapter")))
    msg = str(e.value)
    assert "is a LoRA adapter" in msg and "rldata export-model RUN_ID --merged --out MERGED" in msg
    # a training checkpoint's adapter/: its checkpoint is the merged model already
    ckpt = tmp_path / "runs" / "r1" / "checkpoints" / "step-000004"
    _adapter(ckpt / "adapter")
    shutil.copy(default_model_path() / "config.json", ckpt / "config.json")
    with pytest.raises(RldataError) as e:
        model_identity(str(ckpt / "adapter"))
    msg = str(e.value)
    assert f"give --model {ckpt.resolve()}" in msg
    assert f"rldata export-model r1 --merged --out MERGED --runs-dir {(tmp_path / 'runs').resolve()}" in msg
