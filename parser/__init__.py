"""A daemon that collects feeds and web pages into a SQL database.

The data flows one way: source -> fetch -> parse (protocol adapter) -> record ->
uniqueness check -> staging CSV -> flush -> database.
"""

__version__ = "0.6.0"  # the one place the version is written (pyproject.toml reads it from here)
