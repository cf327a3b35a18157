"""rldata: data engineering for RL post-training of language models.

One verb per stage, each ``verb(store, *, ...)`` returning a frozen result with ``to_dict()``
(see :mod:`rldata.api` and docs/api.md)::

    ingest -> sample -> verify -> filter -> stratify -> train -> export / report

and beside them passrates, cost, rewards, judge, judge_export, env_register, env_list, env_show, and
the data quality verbs decontaminate, dedup, lint and blast_radius.
"""

# The packages rldata.ingest, rldata.verify, rldata.report and rldata.rewards (and the module rldata.cost) share
# their names with verbs.  Importing them first means the verbs bound below win the attribute (a
# submodule import sets its parent's attribute only when it first loads); ``from rldata.verify
# import ...`` still reaches the package.
import rldata.cost
import rldata.ingest
import rldata.report
import rldata.rewards
import rldata.verify  # noqa: F401
from rldata._version import __version__
from rldata.api import (
    EnginePool,
    blast_radius,
    cost,
    decontaminate,
    dedup,
    engines,
    env_list,
    env_register,
    env_show,
    export,
    filter,
    ingest,
    judge,
    judge_export,
    lint,
    passrates,
    predict,
    report,
    rewards,
    sample,
    stratify,
    train,
    verify,
)
from rldata.errors import InputError, RldataError, SchemaError
from rldata.store.core import Store, open_store

__all__ = [
    "EnginePool",
    "InputError",
    "RldataError",
    "SchemaError",
    "Store",
    "__version__",
    "blast_radius",
    "cost",
    "decontaminate",
    "dedup",
    "engines",
    "env_list",
    "env_register",
    "env_show",
    "export",
    "filter",
    "ingest",
    "judge",
    "judge_export",
    "lint",
    "open_store",
    "passrates",
    "predict",
    "report",
    "rewards",
    "sample",
    "stratify",
    "train",
    "verify",
]
