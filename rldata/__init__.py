"""rldata: data engineering for RL post-training of language models."""

from rldata._version import __version__
from rldata.errors import InputError, RldataError, SchemaError
from rldata.store import Store, open_store

__all__ = ["__version__", "open_store", "Store", "RldataError", "SchemaError", "InputError"]
