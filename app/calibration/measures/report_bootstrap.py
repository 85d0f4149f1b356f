"""The bootstrap of reliability reports: one set of resamples for every view of a batch.

Reports of one batch (a version's calibrated probabilities and the raw scores; several
versions in a comparison) share one set of resamples: :func:`bootstrap` draws each chunk of
counts once and hands it to every view, so their intervals, and differences between them, come
from the same resampled rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

import numpy as np
from joblib import Parallel, delayed
from threadpoolctl import ThreadpoolController

from app.calibration.base import FloatArray
from app.calibration.kernels.budget import checkpoint, in_context
from app.calibration.measures.block_resampled import BlockResampler
from app.calibration.measures.block_sums import BLOCKS, Blocks, BlockTables, block_tables
from app.calibration.measures.bootstrap import (
    SEED,
    Float32Array,
    Interval,
    Resamples,
    consistent_labels,
)
from app.calibration.measures.clinical import Line
from app.calibration.measures.intervals import curve_band, measure_intervals
from app.calibration.measures.report import Band
from app.calibration.measures.resampled import View, ViewResampler
from app.calibration.measures.smooth_ece import SmoothEceResampler

VIEWS_AT_ONCE = 2
"""Views resampled together (a version's calibrated and raw reports)."""
THREADED_ENTRIES = 5 * 10**5
"""Rows x resamples from which chunks run in threads when the smooth ECE is not resampled:
below it joblib's dispatch costs more than a second core gives (measured, both headline
reports, 1000 resamples: 10^2 rows, 14 ms threaded and 5 ms in line; 10^3 rows, 27 and 35 ms).
The smooth ECE's chunks gain from threads at any size."""
SMOOTH_RESAMPLES = 1000
"""Resamples behind the smooth ECE's interval and its curve's band at most (the first chunks'):
each searches its own width, so more than the default would cost seconds, not precision."""
CONSISTENCY_RESAMPLES = 200
"""Consistency resamples behind the calibration errors' test at 0 at most (the first chunks'):
a 95% quantile of 200 draws is within a few percent of that of 1000, and the smooth ECE's
values there cost the most (a calibrated model's width is small: finer grids)."""
LARGE_ROWS = 20_000
"""Rows from which the bootstrap resamples blocks of rows through their sums
(:mod:`app.calibration.measures.block_sums`) rather than every row. There the row bootstrap
turns to a single Newton step for the slope (:data:`~app.calibration.measures.resampled.
STEPPED_ROWS`), the blocks' own, and both methods are cheap: measured (CPU seconds, both
reports, 1000 resamples, a busy machine), the headline reports' bootstrap 0.49 s by rows and
0.035 s by blocks at 2 x 10^4 rows (0.43 s and 0.057 s at 10^4, 1.46 s and 0.08 s at 10^5),
the diagnostics' 2.9 s and 1.2 s (most of it the smooth ECE's width searches, the same for
both; 4.1 s and 1.6 s at 10^5)."""


@dataclass(frozen=True)
class Resampled:
    """A view's intervals, each measure's values on the resamples (for paired differences
    between views of one batch), and the band of its smoothed curve."""

    intervals: dict[str, Interval]
    values: dict[str, FloatArray]
    band: Band | None = None


def bootstrap(
    views: Sequence[View],
    inner_edges: Sequence[FloatArray],
    points: Sequence[dict[str, float | None]],
    resamples: int,
    seed: int | None = None,
    n_jobs: int = 2,
    large_rows: int | None = None,
) -> list[Resampled]:
    """The 95% interval of each measure of each view that has one, and its values on the
    resamples, from one set of ``resamples`` Poisson resamples of the batch's rows shared by
    all views (and, in the first chunks, up to CONSISTENCY_RESAMPLES consistency resamples for
    the calibration errors' test at 0).
    ``points`` holds each view's measured values: a measure without one (None or absent)
    gets no interval; the slope, intercept and smooth ECE are resampled only where measured,
    and the smoothed curve (its band) where ``smooth_ece_sigma`` is given.

    From ``large_rows`` rows (default :data:`LARGE_ROWS`) the resamples are of the rows'
    random blocks, read from per-block sums (:mod:`app.calibration.measures.block_sums`), not
    of every row: the same intervals up to Monte Carlo error, in time and memory that barely
    grow with the rows.

    Views are resampled :data:`VIEWS_AT_ONCE` at a time, each group drawing the same seeded
    chunks again: a comparison of 50 versions holds two views' matrices, not fifty."""
    if resamples == 0 or not views:
        return [Resampled({}, {}) for _ in views]
    shared = SharedResamples(views[0].p.size, resamples, seed, large_rows)
    out: list[Resampled] = []
    for first in range(0, len(views), VIEWS_AT_ONCE):  # a loop over groups of views
        group = slice(first, first + VIEWS_AT_ONCE)
        trio = zip(views[group], inner_edges[group], points[group], strict=True)
        samplers = [shared.sampler(view, edges, point) for view, edges, point in trio]
        out += shared.resampled(samplers, views[group], points[group], n_jobs)
    return out


class SharedResamples:
    """The resamples of one batch of ``n`` rows, shared by every view of it: :func:`bootstrap`
    for callers that prepare their views' samplers one at a time, or in threads of their own
    (a fit knows its raw scores before its calibrated probabilities). Rows are resampled below
    ``large_rows`` (default :data:`LARGE_ROWS`), blocks from there (:attr:`blocks`)."""

    def __init__(
        self, n: int, resamples: int, seed: int | None = None, large_rows: int | None = None
    ) -> None:
        self.seed = SEED if seed is None else seed
        self.blocks = Blocks.draw(n, self.seed) if n >= (large_rows or LARGE_ROWS) else None
        self.draws = Resamples(n if self.blocks is None else BLOCKS, resamples, self.seed)

    def sampler(
        self, view: View, edges: FloatArray, point: dict[str, float | None]
    ) -> ViewResampler | BlockResampler:
        """The view's sampler, of rows or of blocks, for the measures ``point`` has."""
        if self.blocks is None:
            return _sampler(view, edges, point)
        return self.block_sampler(self.tables(view, edges, point), view, point)

    def tables(self, view: View, edges: FloatArray, point: dict[str, Any] | None) -> BlockTables:
        """The view's block sums for the measures ``point`` has (None: the means and the AUC,
        to be read off the sums) (from ``large_rows`` rows)."""
        assert self.blocks is not None, "rows are resampled below large_rows"
        measured = point or {}
        return block_tables(
            view,
            edges,
            self.blocks,
            terms=None if point is None else [k for k, v in point.items() if v is not None],
            placements=point is None or point.get("auc") is not None,
            auc=measured.get("auc"),
            line=_line(view, measured),
            offset_intercept=measured.get("calibration_intercept"),
            smooth=measured.get("smooth_ece") is not None,
            smooth_sigma=measured.get("smooth_ece_sigma"),
        )

    def block_sampler(
        self, tables: BlockTables, view: View, point: dict[str, float | None]
    ) -> BlockResampler:
        """The sampler of the view's :meth:`tables`, for the measures ``point`` has."""
        return BlockResampler(
            tables,
            line=_line(view, point),
            offset_intercept=point.get("calibration_intercept"),
            smooth_sigma=point.get("smooth_ece_sigma"),
            seed=self.seed,
        )

    def resampled(
        self,
        samplers: Sequence[ViewResampler | BlockResampler],
        views: Sequence[View],
        points: Sequence[dict[str, float | None]],
        n_jobs: int = 2,
    ) -> list[Resampled]:
        """Each view's :class:`Resampled` on these resamples, from the samplers
        :meth:`sampler` made (all of rows or all of blocks, as :attr:`blocks` says)."""
        if not samplers:
            return []
        null: Consistency
        rows = [s for s in samplers if isinstance(s, ViewResampler)]
        blocks = [s for s in samplers if isinstance(s, BlockResampler)]
        if len(rows if self.blocks is None else blocks) != len(samplers):
            raise TypeError("the samplers must all be of rows, or all of blocks, as blocks says")
        if self.blocks is None:
            null = _row_consistency(rows, views, self.draws)
        else:
            null = _block_consistency(blocks)
        return _resampled(samplers, points, self.draws, n_jobs, null)


class Sampler(Protocol):
    """A view's measures on a chunk of counts (:class:`ViewResampler`, :class:`BlockResampler`)."""

    def statistics(self, counts: Float32Array, smooth: bool = True) -> dict[str, FloatArray]: ...


Consistency = Callable[[int, int, int], list[dict[str, FloatArray]]]
"""Each view's values on the consistency resamples start..stop of the chunk start..end."""


def _row_consistency(
    samplers: Sequence[ViewResampler], views: Sequence[View], draws: Resamples
) -> Consistency:
    """Consistency resamples of rows: labels drawn from each row's p, the same for every view."""

    def consistent(start: int, stop: int, end: int) -> list[dict[str, FloatArray]]:
        uniforms = draws.uniforms(start, end)[:, : stop - start]
        return [
            sampler.consistent(consistent_labels(uniforms, view.p))
            for sampler, view in zip(samplers, views, strict=True)
        ]

    return consistent


def _block_consistency(samplers: Sequence[BlockResampler]) -> Consistency:
    def consistent(start: int, stop: int, end: int) -> list[dict[str, FloatArray]]:
        return [sampler.consistent(start, stop - start) for sampler in samplers]

    return consistent


def _resampled(
    samplers: Sequence[Sampler],
    points: Sequence[dict[str, float | None]],
    draws: Resamples,
    n_jobs: int,
    null: Consistency,
) -> list[Resampled]:
    """:func:`bootstrap` for one group of views, which share each chunk's counts."""

    def chunk(start: int, stop: int) -> list[tuple[dict[str, FloatArray], dict[str, FloatArray]]]:
        checkpoint()
        counts = draws.counts(start, stop)
        smooth = start < SMOOTH_RESAMPLES
        found = [sampler.statistics(counts, smooth) for sampler in samplers]
        if start >= CONSISTENCY_RESAMPLES:
            return [(statistics, {}) for statistics in found]
        # the consistency resamples: the first CONSISTENCY_RESAMPLES only
        on_null = null(start, min(stop, CONSISTENCY_RESAMPLES), stop)
        return list(zip(found, on_null, strict=True))

    # Chunks in threads, numpy's loops and the sparse products releasing the GIL, and BLAS
    # in one thread each: its threads cost more than they give on these narrow products
    # (measured: 0.80 s against 1.07 s for both reports of 10^5 rows, 1000 resamples). The
    # job's context is copied here, in its own thread (see :func:`in_context`).
    in_job = in_context(chunk)
    smooth = any(point.get("smooth_ece") is not None for point in points)
    # a chunk of block resamples is one small product unless it has smooth ECEs to search
    rows = isinstance(samplers[0], ViewResampler)
    threads = n_jobs if smooth or (rows and draws.n * draws.count >= THREADED_ENTRIES) else 1
    with _threadpools().limit(limits=1, user_api="blas"):
        if threads == 1:
            per_chunk = [in_job(start, stop) for start, stop in draws.spans()]
        else:
            per_chunk = Parallel(n_jobs=threads, prefer="threads")(
                delayed(in_job)(start, stop) for start, stop in draws.spans()
            )
    resamples = draws.count
    values: list[dict[str, FloatArray]] = [{} for _ in samplers]
    consistent: list[dict[str, FloatArray]] = [{} for _ in samplers]
    for (start, _), per_view in zip(draws.spans(), per_chunk, strict=True):
        for into, drawn, (statistics, on_null) in zip(values, consistent, per_view, strict=True):
            _append(into, statistics, resamples, start)
            _append(drawn, on_null, resamples, start)
    smoothed = min(resamples, SMOOTH_RESAMPLES)  # the smooth ECE's: within the chunks it read
    out = []
    for point, found, drawn in zip(points, values, consistent, strict=True):
        if "smooth_ece" in found:
            found["smooth_ece"] = found["smooth_ece"][:smoothed]
        curves = found.pop("smooth_curve", None)
        curves = None if curves is None else curves[:smoothed]
        out.append(Resampled(measure_intervals(point, found, drawn), found, curve_band(curves)))
    return out


def _sampler(view: View, edges: FloatArray, point: dict[str, float | None]) -> ViewResampler:
    """The view's resampler, for the measures ``point`` has."""
    measured = point.get("calibration_slope") is not None
    smooth = point.get("smooth_ece") is not None
    return ViewResampler(
        view,
        edges,
        line=view.line() if measured else None,
        offset_intercept=point.get("calibration_intercept"),
        smooth=SmoothEceResampler(view.p, view.y, view.w) if smooth else None,
        smooth_sigma=point.get("smooth_ece_sigma"),
    )


def _line(view: View, point: dict[str, float | None]) -> Line | None:
    """The view's calibration line where ``point`` measured its slope (fitted once a view)."""
    return view.line() if point.get("calibration_slope") is not None else None


def _append(
    into: dict[str, FloatArray], chunk: dict[str, FloatArray], total: int, start: int
) -> None:
    for name, values in chunk.items():
        if name not in into:
            into[name] = np.full((total, *values.shape[1:]), np.nan)
        into[name][start : start + values.shape[0]] = values


@cache
def _threadpools() -> ThreadpoolController:
    """The native libraries' thread pools, found once: finding them walks every library loaded
    (~3 ms a report; 0.05 ms to set the limit). By then the BLAS it limits are loaded."""
    return ThreadpoolController()
