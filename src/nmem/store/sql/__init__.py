"""The SQL both engines share, written once with `?` marks (SQLite runs it as written; the
PostgreSQL engine translates each distinct statement once, `postgres.connection.pg_sql`).

One mixin per concern over `SqlBase`; what differs between the engines is a short `Dialect`
(`sqlite/dialect.py`, `postgres/dialect.py`) and a few engine hooks. Full-text search, schema
and connections stay in each engine. Standard library only, no typing at run time: the SQLite
engine, and so every hook, imports these modules.
"""
