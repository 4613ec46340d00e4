"""The database side: tables for staged records and the idempotent bulk insert (see store.py).

The default SQLite file, items.db, is created in this folder.
"""
