"""Benchmarks: ratios and figures measured side by side in one run (see docs/benchmarks.md)."""
