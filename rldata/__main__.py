from rldata.cli import _entry

_entry()
