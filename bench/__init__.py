"""Benchmarks: scripts that print their configuration and figures (never tests, never asserted).

Run one as a module, e.g. `.venv/bin/python -m bench.store_put_bench --help`.
"""
