"""Benchmarks that print ratios against a reference measured side by side in the same run.

``python -m bench`` runs everything (``make bench``); ``python -m bench --quick`` is the smoke
run (small sizes; no wrk, and over HTTP only the two fits of :mod:`bench.columnar`; ``make
bench-smoke`` and ``tests/bench/test_bench_smoke.py``). Every timing is the median of several
repetitions (but :mod:`bench.columnar`'s, one fit per server), and every row is a ratio ours /
reference, so the table reads the same on a faster or slower machine. Targets come from
issue 6.

``python -m bench.quality`` (``make bench-quality``) measures quality, not time: the test log
loss and Brier score of every calibration method on real data sets, the papers' protocol
(issue 9).
"""
