"""Ingest: task files and generators into the store's ``tasks`` table.

- :mod:`rldata.ingest.files`: the file pipeline (read, map, normalize, dedupe, one append);
- :mod:`rldata.ingest.read`: chunked readers for JSON lines, Parquet, CSV and ``save_to_disk`` dirs;
- :mod:`rldata.ingest.mapping`: column mapping, row rejects naming file:line and field, task ids;
- :mod:`rldata.ingest.presets`: field presets (gsm8k, verl, math) and answer formats;
- :mod:`rldata.ingest.gym`: tasks from a reasoning-gym dataset (imports reasoning_gym only when used).
"""

# the names of files.py's __all__, listed once there
from rldata.ingest.files import *
from rldata.ingest.files import __all__  # noqa: F401
