"""Hub model ids (``Qwen/Qwen2.5-0.5B-Instruct``) resolved from the local Hugging Face cache, offline.

rldata never downloads a model: a hub id is looked up where ``huggingface_hub`` keeps what it
downloaded (``models--ORG--NAME/refs/main`` -> ``snapshots/<commit>``), through its own
``snapshot_download(..., local_files_only=True)``, so an incomplete snapshot is caught as it
would be there.  The cache is found as huggingface_hub finds it, read when called (not at import):
``HF_HUB_CACHE``, else ``HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub`` or
``~/.cache/huggingface/hub``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from rldata.errors import ConfigError

__all__ = ["cached_snapshot", "hub_cache_dir", "is_hub_id"]

# ORG/NAME or NAME, as the hub spells repository ids; an optional @revision (a branch or commit)
_HUB_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*(?:@[\w./-]+)?$")


def hub_cache_dir() -> Path:
    """The hub cache directory huggingface_hub would use with the current environment."""
    env = os.environ
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    if env.get("HUGGINGFACE_HUB_CACHE"):  # the older name, still honoured by huggingface_hub
        return Path(env["HUGGINGFACE_HUB_CACHE"]).expanduser()
    home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"


def is_hub_id(name: str) -> bool:
    """Whether ``name`` can be a hub id (and is not written as a path: ./x, /x, ~/x, a/b/c)."""
    return bool(_HUB_ID.match(name)) and not name.startswith((".", "~"))


def cached_snapshot(model: str) -> Path:
    """The snapshot directory of hub id ``model`` (``ORG/NAME`` or ``ORG/NAME@REVISION``) in the
    local cache.  Raises ConfigError (field ``model``), naming the id and the cache path searched,
    when it is not there or is incomplete; nothing is downloaded."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    repo_id, _, revision = model.partition("@")
    cache = hub_cache_dir()
    where = cache / ("models--" + repo_id.replace("/", "--"))
    try:
        path = Path(
            snapshot_download(repo_id, revision=revision or None, cache_dir=str(cache), local_files_only=True)
        )
    except (LocalEntryNotFoundError, HFValidationError, OSError) as e:
        # IncompleteSnapshotError is a LocalEntryNotFoundError; its message says which files are missing
        detail = "" if type(e) is LocalEntryNotFoundError else f" ({type(e).__name__}: {e})"
        raise ConfigError(
            f"model {model}: not a model directory, and not in the local Hugging Face cache "
            f"(searched {where}){detail}; nothing is downloaded: fetch it first "
            "(hf download) or set HF_HUB_CACHE / HF_HOME",
            field="model",
        ) from None
    if not (path / "config.json").is_file():
        raise ConfigError(
            f"model {model}: the cached snapshot {path} has no config.json (not a transformers model)",
            field="model",
        )
    return path
