"""``python -m bench [--quick]``: run the benchmarks and print one markdown table of ratios."""

from __future__ import annotations

import argparse
import time

from bench.adjust import adjust_rows
from bench.columnar import columnar_rows
from bench.diagnostics import diagnostics_rows
from bench.estimates import estimates_rows
from bench.fits import sklearn_rows, variant_rows
from bench.kernels import kernel_rows
from bench.load import load_rows
from bench.memory import memory_rows
from bench.pages import page_rows
from bench.table import Row, markdown, progress


def main() -> None:
    """Parse the flags, run every section, print the table (stdout) and the time taken."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="the smoke run: small sizes, no wrk")
    quick = parser.parse_args().quick
    start = time.monotonic()
    rows: list[Row] = []
    if quick:
        # Every row kind of the full run but HTTP's and traffic's, on sizes small beside the
        # interpreters the memory rows (four) and the columnar rows (one server, both fits
        # on it: a server's start is most of the columnar rows' cost) start, so that the
        # smoke run stays within 30 s; the predict kernels keep 10^5, where their target
        # applies and which costs a second. The load rows keep 16 fits on one name.
        rows += sklearn_rows([10**3, 10**4])
        rows += variant_rows([1_000], repeat=1)
        rows += kernel_rows(10**5, 5)
        rows += memory_rows(10**4)
        rows += columnar_rows(10**3, one_server=True)
        rows += diagnostics_rows([10**3], repeat=1)
        rows += adjust_rows([10**4], repeat=1)
        rows += estimates_rows(10**5, repeat=1)
        rows += load_rows(quick=True)
    else:
        rows += sklearn_rows([10**4, 10**5, 10**6, 10**7])
        rows += variant_rows([10**4, 10**5])
        rows += kernel_rows(10**6, 7)
        rows += memory_rows(10**7)
        rows += columnar_rows(10**7)
        rows += diagnostics_rows([10**5, 10**6])
        rows += adjust_rows([10**6])
        rows += estimates_rows(10**6)
        rows += page_rows()
        from bench.class_rollups import class_rollup_rows
        from bench.client import client_rows  # the client's own distribution (client/)
        from bench.history import history_rows  # needs PostgreSQL's server and moto
        from bench.http import http_rows  # needs wrk; imported only for the full run
        from bench.objects import object_rows  # needs PostgreSQL's server and moto
        from bench.rollups import rollup_rows  # needs PostgreSQL's server
        from bench.traffic import traffic_rows  # needs PostgreSQL's server

        rows += http_rows()
        rows += object_rows()
        rows += history_rows()
        rows += rollup_rows()
        rows += class_rollup_rows()
        rows += traffic_rows()
        rows += load_rows(quick=False)
        rows += client_rows()
    print(markdown(rows))
    progress(f"{'quick' if quick else 'full'} bench done in {time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    main()
