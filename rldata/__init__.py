"""rldata: data engineering for RL post-training of language models.

One verb per stage, each ``verb(store, *, ...)`` returning a frozen result with ``to_dict()``
(see :mod:`rldata.api` and docs/api.md)::

    ingest -> sample -> verify -> filter -> stratify -> train -> export / report
"""

# The packages rldata.ingest, rldata.verify and rldata.report share their names with verbs.  Importing
# them first means the verbs bound below win the attribute (a submodule import sets its parent's
# attribute only when it first loads); ``from rldata.verify import ...`` still reaches the package.
import rldata.ingest
import rldata.report
import rldata.verify  # noqa: F401
from rldata._version import __version__
from rldata.api import export, filter, ingest, report, sample, stratify, train, verify
from rldata.errors import InputError, RldataError, SchemaError
from rldata.store import Store, open_store

__all__ = [
    "InputError",
    "RldataError",
    "SchemaError",
    "Store",
    "__version__",
    "export",
    "filter",
    "ingest",
    "open_store",
    "report",
    "sample",
    "stratify",
    "train",
    "verify",
]
