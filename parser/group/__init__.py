"""SHARED = True: what several daemons on one PostgreSQL coordinate."""
