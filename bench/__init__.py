"""Benchmarks: ratios and figures measured side by side in one run (see README, "Benchmarks")."""
