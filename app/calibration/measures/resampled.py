"""The measures of a report on every bootstrap resample, a chunk of resamples at a time.

A report reads a batch as a *view*: probabilities p, the 0/1 outcomes they predict, weights,
and the per-row terms whose weighted means are the losses (binary, top-label or one class
against the rest; :mod:`app.calibration.measures.report`). :class:`ViewResampler` prepares a view
once (rows sorted by p) and then turns a chunk of
:class:`~app.calibration.measures.bootstrap.Resamples` counts into each measure's value per
resample:

- means (log loss, Brier score, accuracy): one matrix product of the weighted counts with the
  per-row terms;
- binned ECE: sums of weight, weight x p and weight x y over contiguous runs of sorted rows
  (``np.add.reduceat``), per bin; the bins are the batch's, fixed;
- AUC: the same sums over at most :data:`AUC_ATOMS` runs of rows ("atoms", cut only between
  distinct p), then the Mann-Whitney sum over atoms. Pairs within an atom whose p differ
  (at most one pair in AUC_ATOMS of all pairs) enter with the batch's own within-atom sum,
  which is their expectation under Poisson counts; with AUC_ATOMS distinct p or fewer the AUC
  is exact;
- calibration slope and intercept: one Newton step from the batch's estimate, whose score
  and information are sums of per-row terms at that estimate (the one-step bootstrap of
  Moulton & Zeger, "Bootstrapping generalized linear models", 1991), so again one matrix
  product;
- smooth ECE: :mod:`app.calibration.measures.smooth_ece`'s resampler, with each resample's own
  bandwidth.

Consistency resamples (labels drawn from p, weights as given) give the binned and smooth ECE
of a perfectly calibrated model with this batch's p, for the test at the lower end of their
intervals (:func:`~app.calibration.measures.bootstrap.calibration_error_interval`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import NDArray
from scipy.sparse import csc_matrix
from scipy.special import expit, logit

from app.calibration.base import FloatArray
from app.calibration.measures.auc_atoms import auc_atoms, within_atoms_auc
from app.calibration.measures.bootstrap import Float32Array
from app.calibration.measures.clinical import Line, calibration_line

NEWTON_STEPS = 2
"""Newton steps per resample for the slope and intercept on batches of up to STEPPED_ROWS
rows, the second over rows and resamples in float32; larger batches take the first only (its
error shrinks as 1/n, the spread as 1/sqrt(n): measured, under 7% of the spread at 5000
rows; after the second, Newton's convergence being quadratic, under 0.5%)."""
STEPPED_ROWS = 20_000
SCATTER_ROWS = 1 << 20
"""Rows per slice of a scatter, which holds the GIL (about 15 ms each)."""
EPS = 1e-15


class SmoothResampler(Protocol):
    """What the bootstrap needs of the smooth ECE (:class:`~app.calibration.measures.smooth_ece.
    SmoothEceResampler`): its value per resample, and the smoothed curve per resample."""

    def values(
        self, weights: Float32Array | None, labels: Float32Array | None = None
    ) -> FloatArray: ...

    def curves(self, weights: Float32Array, sigma: float) -> FloatArray: ...


@dataclass(frozen=True)
class View:
    """A batch as one report reads it: ``p`` binned and smoothed against outcomes ``y`` (0/1)
    with weights ``w`` (relative, largest in [0.5, 1)), and ``terms``, which makes the per-row
    values whose weighted means are measures (``log_loss``, ``brier``, ``accuracy``) of the
    rows in a slice (``slice(None)``: all) when a bootstrap needs them."""

    p: FloatArray
    y: FloatArray
    w: FloatArray
    terms: Callable[[slice], Mapping[str, FloatArray]] = lambda rows: {}
    fitted: dict[str, Line | None] = field(default_factory=dict, compare=False, repr=False)
    """What :meth:`line` fitted, kept: a report's measures and its bootstrap both read it."""

    def line(self) -> Line | None:
        """The view's :func:`~app.calibration.measures.clinical.calibration_line`, fitted once:
        a Newton fit over every row, which a report's measures and its bootstrap would
        otherwise each pay."""
        if "line" not in self.fitted:
            self.fitted["line"] = calibration_line(self.p, self.y, self.w)
        return self.fitted["line"]


class ViewResampler:
    """The measures of one view on chunks of resamples (counts in the batch's row order)."""

    def __init__(
        self,
        view: View,
        inner_edges: FloatArray,
        *,
        line: Line | None,
        offset_intercept: float | None,
        smooth: SmoothResampler | None = None,
        smooth_sigma: float | None = None,
    ) -> None:
        by_p = np.argsort(view.p)  # ties in any order: atoms are cut only where p changes
        p_sorted = view.p[by_p]
        atoms, distinct = auc_atoms(p_sorted, np.searchsorted(p_sorted, inner_edges, side="right"))
        # each row's atom: a running count of atom starts in sorted order, scattered back to
        # the batch's order a slice at a time (one scatter of 10^7 rows holds the GIL for
        # 0.15 s, stalling the event loop; a search by p releases it but costs 1 s)
        starts = np.zeros(p_sorted.size, dtype=np.int32)
        starts[atoms[1:]] = 1
        sorted_atoms = np.cumsum(starts, dtype=np.int32)
        atom_of_row = np.empty(p_sorted.size, dtype=np.int32)
        for first in range(0, p_sorted.size, SCATTER_ROWS):
            rows = slice(first, first + SCATTER_ROWS)
            atom_of_row[by_p[rows]] = sorted_atoms[rows]
        p, y, w = view.p, view.y, view.w
        self.p, self.y, self.w = p, y, w
        self.unit_weights = bool(w.min() == w.max() == 1.0)
        self.smooth, self.smooth_sigma = smooth, smooth_sigma
        terms = view.terms(slice(None))
        self.names = list(terms)
        self.n_atoms = atoms.size
        # each atom's negative and positive weight: a sparse product with the rows' (atom,
        # label) cell, in the batch's order (no gather of the counts); and each bin's sum of
        # p - y, for the ECE: two entries per row (column) of one sparse matrix, built as CSC
        # directly (no sort; its product with the counts is also the fastest, measured)
        bins = np.searchsorted(inner_edges, p)  # a point on an edge belongs to the lower bin
        n_cells = 2 * atoms.size + inner_edges.size + 1
        values = np.ones(2 * p.size, dtype=np.float32)
        np.subtract(p, y, out=values[1::2], casting="same_kind")
        index = np.int32 if 2 * p.size < np.iinfo(np.int32).max else np.int64  # scipy's own
        cells = np.empty(2 * p.size, dtype=index)
        np.add(atom_of_row * 2, y > 0, out=cells[0::2], casting="unsafe")
        np.add(bins, 2 * atoms.size, out=cells[1::2], casting="unsafe")
        self.cells_by_row = csc_matrix(
            (values, cells, np.arange(0, 2 * p.size + 1, 2, dtype=index)), shape=(n_cells, p.size)
        )
        z = logit(np.clip(p, EPS, 1.0 - EPS))
        self.z = z
        # the per-row terms as the rows of one float32 matrix, written row by row (a
        # column_stack of ten batch-long columns costs more than everything else here)
        k = 2 + len(self.names) + 5 * (line is not None) + 2 * (offset_intercept is not None)
        self.terms = np.empty((k, p.size), dtype=np.float32)
        self.terms[0] = 1.0
        self.terms[1] = y
        for j, name in enumerate(self.names):
            self.terms[2 + j] = terms[name]
        k = 2 + len(self.names)
        self.line = line
        if line is not None:
            mu = expit(line.intercept + line.slope * z)
            h = mu * (1.0 - mu)
            residual = y - mu
            self.terms[k] = residual
            self.terms[k + 1] = residual * z
            self.terms[k + 2] = h
            h *= z
            self.terms[k + 3] = h
            h *= z
            self.terms[k + 4] = h
            k += 5
        self.offset_intercept = offset_intercept
        if offset_intercept is not None:
            mu = expit(offset_intercept + z)
            self.terms[k] = y - mu
            mu *= 1.0 - mu
            self.terms[k + 1] = mu
        # the consistency resamples' bin sums: sum w y* per bin, against the fixed sum w p
        self.bin_weights = csc_matrix(
            (w.astype(np.float32), bins.astype(index), np.arange(p.size + 1, dtype=index)),
            shape=(inner_edges.size + 1, p.size),
        )
        self.bin_predicted = np.bincount(bins, w * p, minlength=inner_edges.size + 1)
        self.within_auc = within_atoms_auc(
            p_sorted, (y * w)[by_p], ((1.0 - y) * w)[by_p], atoms, distinct
        )

    def statistics(self, counts: Float32Array, smooth: bool = True) -> dict[str, FloatArray]:
        """Each measure on each resample of ``counts`` (rows x resamples, batch order); the
        smooth ECE and curve too unless ``smooth`` is False."""
        c = counts if self.unit_weights else counts * self.w[:, None].astype(np.float32)
        sums = (self.terms @ c).T.astype(np.float64)
        total, positive = sums[:, 0], sums[:, 1]
        out: dict[str, FloatArray] = {}
        with np.errstate(invalid="ignore", divide="ignore"):
            for j, name in enumerate(self.names):
                out[name] = sums[:, 2 + j] / total
            k = 2 + len(self.names)
            if self.line is not None:
                out["calibration_slope"] = self._slope(c, sums[:, k : k + 5])
                k += 5
            if self.offset_intercept is not None:
                out["calibration_intercept"] = self._intercept(c, sums[:, k] / sums[:, k + 1])
            # cells x resamples, each resample's cells contiguous: the AUC's running sums
            # over cells are three times faster so (measured)
            cells = np.asarray(self.cells_by_row @ c, dtype=np.float64, order="F")
            atoms = 2 * self.n_atoms
            out["ece"] = np.abs(cells[atoms:]).sum(axis=0) / total
            out["auc"] = self._auc(cells[1:atoms:2], cells[0:atoms:2], positive, total)
        if self.smooth is not None and smooth:
            out["smooth_ece"] = self.smooth.values(c)
            if self.smooth_sigma is not None:  # the curve at the batch's own width, per resample
                out["smooth_curve"] = self.smooth.curves(c, self.smooth_sigma)
        return out

    def consistent(self, labels: NDArray[np.bool_]) -> dict[str, FloatArray]:
        """The binned and smooth ECE on consistency resamples (labels rows x resamples, batch
        order, drawn from p), with the view's own weights."""
        y = labels.astype(np.float32)
        gap = self.bin_predicted - np.asarray(self.bin_weights @ y, dtype=np.float64).T
        out = {"ece": np.abs(gap).sum(axis=1) / self.w.sum()}
        if self.smooth is not None:
            out["smooth_ece"] = self.smooth.values(None, y)
        return out

    def _slope(self, c: Float32Array, s: FloatArray) -> FloatArray:
        """Each resample's slope: one :func:`newton_step` from the batch's line, its sums
        from the matrix product, then :data:`NEWTON_STEPS` - 1 more on small batches."""
        assert self.line is not None
        slope, intercept = newton_step(self.line.slope, self.line.intercept, list(s.T))
        if self.p.size > STEPPED_ROWS:
            return slope
        z, y = self.z.astype(np.float32), self.y.astype(np.float32)
        for _ in range(NEWTON_STEPS - 1):  # a loop over steps, each over rows and resamples
            mu = expit(intercept.astype(np.float32) + z[:, None] * slope.astype(np.float32))
            residual = c * (y[:, None] - mu)
            mu *= 1.0 - mu
            mu *= c  # the information's weights
            sums = (_sums(residual), _sums(residual, z), _sums(mu), _sums(mu, z), _sums(mu, z * z))
            slope, intercept = newton_step(slope, intercept, sums)
        return slope

    def _intercept(self, c: Float32Array, step: FloatArray) -> FloatArray:
        """Each resample's calibration-in-the-large: a Newton step from the batch's, then
        :data:`NEWTON_STEPS` - 1 more on small batches."""
        assert self.offset_intercept is not None
        alpha = self.offset_intercept + step
        if self.p.size > STEPPED_ROWS:
            return alpha
        z, y = self.z.astype(np.float32), self.y.astype(np.float32)
        for _ in range(NEWTON_STEPS - 1):
            mu = expit(alpha.astype(np.float32) + z[:, None])
            residual = c * (y[:, None] - mu)
            mu *= 1.0 - mu
            mu *= c
            alpha = alpha + _sums(residual) / _sums(mu)
        result: FloatArray = alpha
        return result

    def _auc(
        self, atom_y: FloatArray, atom_n: FloatArray, positive: FloatArray, total: FloatArray
    ) -> FloatArray:
        """Each resample's AUC from its atoms' positive and negative weights (atoms x
        resamples, atoms in order of p): pairs ranked right, ties in an atom counted half."""
        below = np.cumsum(atom_n, axis=0) - atom_n
        pairs = (atom_y * (below + 0.5 * atom_n)).sum(axis=0) + self.within_auc
        auc: FloatArray = pairs / (positive * (total - positive))
        return auc


def newton_step(
    slope: FloatArray | float, intercept: FloatArray | float, sums: Sequence[FloatArray]
) -> tuple[FloatArray, FloatArray]:
    """(slope, intercept) += I^-1 U for the line logit P(y = 1) = intercept + slope z, from
    the score U = (sum r z, sum r) and information I = [[sum h z^2, sum h z], [sum h z, sum h]]
    given as ``sums`` = (sum r, sum r z, sum h, sum h z, sum h z^2), r = w (y - mu) and
    h = w mu (1 - mu) at the current line (each sum an array over resamples)."""
    r, rz, h, hz, hzz = sums
    det = hzz * h - hz * hz
    return slope + (h * rz - hz * r) / det, intercept + (hzz * r - hz * rz) / det


def _sums(values: Float32Array, by: Float32Array | None = None) -> FloatArray:
    """Column sums of ``values`` (rows x resamples), each row weighted by ``by``: a float32
    matrix product, in float64."""
    weights = np.ones(values.shape[0], dtype=np.float32) if by is None else by
    return np.asarray(weights @ values, dtype=np.float64)
