"""Benchmarks that print ratios against a reference measured side by side in the same run.

``python -m bench`` runs everything (``make bench``); ``python -m bench --quick`` is the smoke
run (small sizes, no HTTP; ``make bench-smoke`` and ``tests/test_bench_smoke.py``). Every
timing is the median of several repetitions, and every row is a ratio ours / reference, so the
table reads the same on a faster or slower machine. Targets come from issue 6.
"""
