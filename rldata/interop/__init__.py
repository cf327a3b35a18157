"""Interop with other trainers: export selections (veRL, TRL, OpenRLHF, HF, JSONL), import their
rollout dumps, and the lineage manifest every export carries.  The jobs take their configs
(:class:`ExportConfig`, :class:`ImportConfig`) themselves."""

from rldata.interop.export import FORMATS, export_selection
from rldata.interop.imports import IMPORT_FORMATS, ImportResult, import_rollouts
from rldata.interop.lineage import MANIFEST_NAME, dataset_changed, dataset_hash, read_manifest, verify
from rldata.interop.options import ExportConfig, ImportConfig

__all__ = [
    "FORMATS",
    "IMPORT_FORMATS",
    "MANIFEST_NAME",
    "ExportConfig",
    "ImportConfig",
    "ImportResult",
    "dataset_changed",
    "dataset_hash",
    "export_selection",
    "import_rollouts",
    "read_manifest",
    "verify",
]
