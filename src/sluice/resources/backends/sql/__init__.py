"""The SQL resource backend: SQLite (the embedded default) and PostgreSQL, on the store's
tables.

- `backend.py`: SqlBackend, one transaction per operation, and its wake-ups;
- `tables.py`: the tables by name, and the column orders shared with migration 0002;
- `reads.py`: what a transaction reads, turned into the admission rule's view;
- `writes.py`: what a transaction changes (holders, waiters, counters, quotas);
- `pg_calls.py`: the same steps as one server-function call each, on PostgreSQL.

Imports go one way: backend -> pg_calls -> writes -> reads -> tables.
"""

from __future__ import annotations

from sluice.resources.backends.sql.backend import SqlBackend

__all__ = ["SqlBackend"]
