"""The store: one Delta Lake table per kind of record, every write validated against its schema.

- :mod:`~rldata.store.core`: :class:`Store` and :func:`open_store` (append, upsert, read, SQL);
- :mod:`~rldata.store.validate`: rows (dicts, Arrow, Polars) into exactly a table's schema, or an error;
- :mod:`~rldata.store.migrate`, :mod:`~rldata.store.rehash`: upgrades of stores an older rldata wrote;
- :mod:`~rldata.store.read`: filtered reads that work on every file the store writes;
- :mod:`~rldata.store.ledger_sql`: the SQL of the pass-rate ledger's counts (shared with the upgrades);
- :mod:`~rldata.store.damage`: what makes a table unreadable, and its repair;
- :mod:`~rldata.store.run_commits`: runs tagged into the data commits they make;
- :mod:`~rldata.store.outputs`: files written beside the store, never inside it.
"""

from rldata.store.core import Store, open_store

__all__ = ["Store", "open_store"]
