"""Interop with other trainers: export selections (veRL, TRL, OpenRLHF, HF, JSONL), import their
rollout dumps, and the lineage manifest every export carries."""

from rldata.interop.export import FORMATS, ExportSpec, export_selection
from rldata.interop.imports import IMPORT_FORMATS, ImportResult, ImportSpec, import_rollouts
from rldata.interop.lineage import MANIFEST_NAME, dataset_changed, dataset_hash, read_manifest, verify

__all__ = [
    "FORMATS",
    "IMPORT_FORMATS",
    "MANIFEST_NAME",
    "ExportSpec",
    "ImportResult",
    "ImportSpec",
    "dataset_changed",
    "dataset_hash",
    "export_selection",
    "import_rollouts",
    "read_manifest",
    "verify",
]
