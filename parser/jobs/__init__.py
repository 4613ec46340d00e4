"""The two-pass technique: a job's pass 1 (links) and pass 2 (objects) on the daemon's loop."""
