"""The SQL resource backend: SQLite (the embedded default) and PostgreSQL, on the store's
tables.

- `backend.py`: SqlBackend, one transaction per operation, and its wake-ups;
- `lite.py`: allocate, release and renew on SQLite, plain statements on the store's direct
  sqlite3 path (store/direct.py);
- `pg_direct.py`: the same on PostgreSQL, one server-function call per step (migration
  0002) on the store's direct psycopg connections (store/pgdirect.py);
- `tables.py`: the tables by name, and the column orders shared with migration 0002;
- `reads.py`: what a transaction reads, turned into the admission rule's view (SQLAlchemy:
  snapshots, sweeps, quota changes, and the pure row-to-view helpers the hot paths share);
- `writes.py`: what a SQLAlchemy transaction changes (sweeps, quotas) and the pure helpers.

Imports go one way: backend -> pg_direct -> lite -> writes -> reads -> tables.
"""

from __future__ import annotations

from sluice.resources.backends.sql.backend import SqlBackend

__all__ = ["SqlBackend"]
