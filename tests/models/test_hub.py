"""``--model`` as a hub id: resolved from the local Hugging Face cache (its real on-disk layout,
through huggingface_hub's own lookup), never downloaded; a clear one-line error when not cached."""

from __future__ import annotations

import pytest

from rldata.engine.core import model_identity, model_revision
from rldata.errors import ConfigError
from rldata.models.hub import cached_snapshot, hub_cache_dir, is_hub_id
from tests.hub_helpers import COMMIT, lay_out_hub_cache

HUB_ID = "Qwen/Qwen2.5-0.5B-Instruct"


@pytest.fixture
def no_hf_env(monkeypatch):
    for k in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_cache_dir_follows_the_environment(no_hf_env, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert hub_cache_dir() == tmp_path / "home" / ".cache" / "huggingface" / "hub"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub_cache_dir() == tmp_path / "xdg" / "huggingface" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert hub_cache_dir() == tmp_path / "hf" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "c"))
    assert hub_cache_dir() == tmp_path / "c"


def test_hub_ids_and_paths():
    for name in (HUB_ID, "gpt2", "org/name@main", "meta-llama/Llama-3.2-1B"):
        assert is_hub_id(name), name
    for name in ("./m", "../m", "/abs/m", "~/m", "a/b/c", "org/", "with space/x"):
        assert not is_hub_id(name), name


def test_resolves_from_the_cache(qwen_hub_cache, qwen_model):
    ident = model_identity(HUB_ID)
    snap = qwen_hub_cache / "models--Qwen--Qwen2.5-0.5B-Instruct" / "snapshots" / COMMIT
    assert ident.path == str(snap) and ident.load == str(snap.resolve())
    assert ident.model_id == HUB_ID and ident.hub_id == HUB_ID
    # the weights hash through the symlinks to the blobs: the same revision as the directory itself
    assert ident.revision == model_revision(qwen_model)
    assert ident.name == f"Qwen2.5-0.5B-Instruct@{ident.revision}"


def test_hf_home_and_a_named_revision(no_hf_env, monkeypatch, qwen_model, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    other = "0" * 40
    lay_out_hub_cache(tmp_path / "hf" / "hub", "org/tiny", qwen_model, commit=other, ref="v1")
    assert cached_snapshot("org/tiny@v1").name == other
    assert cached_snapshot(f"org/tiny@{other}").name == other
    with pytest.raises(ConfigError, match="org/tiny"):
        cached_snapshot("org/tiny")  # no refs/main: the id alone means main


def test_not_cached_is_one_line_naming_id_and_cache(no_hf_env, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    with pytest.raises(ConfigError) as e:
        model_identity(HUB_ID)
    msg = str(e.value)
    assert "\n" not in msg and e.value.field == "model"
    assert HUB_ID in msg and str(tmp_path / "empty" / "models--Qwen--Qwen2.5-0.5B-Instruct") in msg
    assert not (tmp_path / "empty").exists() or not any((tmp_path / "empty").iterdir())  # nothing fetched


def test_incomplete_or_foreign_snapshot_is_refused(no_hf_env, monkeypatch, qwen_model, tmp_path):
    cache = tmp_path / "c"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    snap = lay_out_hub_cache(cache, "org/broken", qwen_model)
    (snap / "config.json").unlink()
    with pytest.raises(ConfigError, match="no config.json"):
        model_identity("org/broken")
    # refs/main names a commit whose snapshot is not there (an interrupted download)
    lay_out_hub_cache(cache, "org/gone", qwen_model)
    (cache / "models--org--gone" / "refs" / "main").write_text("1" * 40)
    with pytest.raises(ConfigError, match="not in the local Hugging Face cache"):
        model_identity("org/gone")


def test_cli_error_is_one_line(no_hf_env, monkeypatch, tmp_path, capsys):
    from rldata.cli import main

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    code = main(["--store", str(tmp_path / "s"), "sample", "--model", HUB_ID])
    out, err = capsys.readouterr()
    assert code != 0 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and HUB_ID in lines[0] and "models--Qwen--Qwen2.5-0.5B-Instruct" in lines[0]
    assert "Traceback" not in err
