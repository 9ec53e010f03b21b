"""State store: schema, migrations, repositories over SQLite (embedded) and PostgreSQL."""
