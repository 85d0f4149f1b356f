"""The smooth ECE, its width and its curves against relplot (Błasiok & Nakkiran's own package),
frequency weights against replicated rows, and the bootstrap kernel against a loop of
:func:`smooth_ece` over its resamples."""

from __future__ import annotations

import numpy as np
import pytest
import relplot
from relplot.kernels import ReflectedGaussianKernel
from relplot.metrics import smooth_ece as relplot_smooth_ece_at

from app.calibration import CalibrationError
from app.calibration.measures._mesh_basis import BASIS_ROWS, mesh_basis
from app.calibration.measures._smooth_kernel import (
    FINEST_GRID,
    grid_size,
    reflected_gaussian,
    reflected_spectra,
    smooth_eces,
    split_onto_grid,
)
from app.calibration.measures.smooth_ece import (
    SmoothEceResampler,
    _coarsened,
    smooth_curve,
    smooth_ece,
    smooth_ece_at,
)

RESAMPLED_RTOL = 1e-4
"""The bootstrap's smooth ECE against :func:`smooth_ece` (measured: under 3e-5)."""


def batch(
    seed: int, n: int, a: float = 2.0, b: float = 5.0, power: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """p ~ Beta(a, b), labels drawn from p ** power (calibrated for power 1)."""
    rng = np.random.default_rng(seed)
    p = rng.beta(a, b, n)
    return p, (rng.random(n) < p**power).astype(np.float64)


def assert_equals_relplot(p: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> None:
    copies = np.arange(p.size) if w is None else np.repeat(np.arange(p.size), w.astype(int))
    value, width = relplot.smECE(p[copies], y[copies], eps=0.001, return_width=True)
    result = smooth_ece(p, y, w)
    assert result.sigma == width
    assert result.value == pytest.approx(value, abs=1e-9)


@pytest.mark.parametrize(
    ("seed", "n", "a", "b", "power"),
    [
        (1, 1, 2.0, 5.0, 1.0),
        (2, 2, 2.0, 5.0, 1.0),
        (3, 7, 0.5, 0.5, 1.0),
        (4, 60, 2.0, 5.0, 1.6),
        (5, 400, 0.5, 0.5, 0.5),
        (6, 3000, 2.0, 5.0, 1.0),
        (7, 3000, 5.0, 2.0, 2.0),
        (8, 20000, 0.7, 0.7, 1.3),
        (9, 20000, 2.0, 5.0, 1.0),
    ],
)
def test_smooth_ece_and_width_equal_relplot(
    seed: int, n: int, a: float, b: float, power: float
) -> None:
    assert_equals_relplot(*batch(seed, n, a, b, power))


def test_tied_scores_and_the_ends_of_the_interval_equal_relplot() -> None:
    p, y = batch(10, 5000, 0.4, 0.4, 1.2)
    assert_equals_relplot(np.round(p, 1), y)  # eleven distinct scores
    ends = np.concatenate([np.zeros(300), np.ones(300), p[:400]])
    labels = np.concatenate([np.zeros(280), np.ones(20), np.ones(290), np.zeros(10), y[:400]])
    assert_equals_relplot(ends, labels)  # p exactly 0 and 1 (1 sits on the last grid point)
    assert_equals_relplot(np.full(500, 0.3), y[:500])  # one score
    assert_equals_relplot(np.full(50, 0.3), np.zeros(50))  # one score, one class


def test_a_well_calibrated_large_batch_below_sigma_0_01_equals_relplot() -> None:
    p, y = batch(11, 100_000)
    result = smooth_ece(p, y)
    assert result.sigma < 0.01  # a grid finer than 1001 points
    assert_equals_relplot(p, y)


def test_integer_weights_count_as_copies() -> None:
    p, y = batch(12, 1500, power=1.4)
    w = np.random.default_rng(13).integers(0, 5, size=p.size).astype(np.float64)
    assert_equals_relplot(p, y, w)  # zeros included: those rows drop out
    assert smooth_ece(p, y, 3 * np.ones_like(p)).value != smooth_ece(p, y).value  # scale counts


@pytest.mark.parametrize("sigma", [0.9, 0.2, 0.05, 0.0101, 0.007, 0.0023])
def test_fixed_width_smooth_ece_equals_relplot(sigma: float) -> None:
    p, y = batch(14, 4000, 0.6, 0.9, 1.3)
    assert smooth_ece_at(p, y, None, sigma) == pytest.approx(
        relplot_smooth_ece_at(p, y, sigma), abs=1e-12
    )


@pytest.mark.parametrize("sigma", [0.4, 0.06, 0.012, 0.004])
def test_curve_and_density_equal_relplots_kernel(sigma: float) -> None:
    p, y = batch(15, 3000, 3.0, 9.0, 1.5)  # p crowded near 0.25: the curve has empty tails
    curve = smooth_curve(p, y, None, sigma)
    kernel = ReflectedGaussianKernel(sigma)
    np.testing.assert_array_equal(curve.t, np.linspace(0, 1, 200))
    np.testing.assert_allclose(curve.mu, kernel.smooth(p, y, curve.t)[0], rtol=0, atol=1e-9)
    np.testing.assert_allclose(curve.density, kernel.kde(p, curve.t), rtol=0, atol=1e-9)


def test_curve_at_the_automatic_width_is_relplots_diagram() -> None:
    p, y = batch(16, 2000, power=1.3)
    diagram = relplot.prepare_rel_diagram(p, y, plot_confidence_band=False, report_CE_std=False)
    result = smooth_ece(p, y)
    curve = smooth_curve(p, y, None, result.sigma)
    assert result.sigma == diagram["sigma"]
    assert result.value == pytest.approx(diagram["ce"], abs=1e-9)
    np.testing.assert_allclose(curve.mu, diagram["mu"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(curve.density, diagram["density"], rtol=0, atol=1e-9)


def test_weighted_curve_equals_replicated_rows() -> None:
    p, y = batch(17, 800, power=0.8)
    w = np.random.default_rng(18).integers(0, 4, size=p.size).astype(np.float64)
    copies = np.repeat(np.arange(p.size), w.astype(int))
    curve, replicated = (
        smooth_curve(p, y, w, 0.03, mesh=150),
        smooth_curve(p[copies], y[copies], None, 0.03, mesh=150),
    )
    np.testing.assert_allclose(curve.mu, replicated.mu, rtol=0, atol=1e-12)
    np.testing.assert_allclose(curve.density, replicated.density, rtol=0, atol=1e-12)


def weighted_batch(seed: int, n: int, power: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    p, y = batch(seed, n, power=power)  # in the batch's order, unsorted
    w = np.random.default_rng(seed).integers(1, 4, size=n).astype(np.float64)
    return p, y, w


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_resampler_equals_a_loop_of_smooth_ece(dtype: type) -> None:
    p, y, w = weighted_batch(19, 4000, 1.3)
    counts = np.random.default_rng(20).poisson(1.0, (p.size, 2 * BASIS_ROWS))
    weights = (counts * w[:, None]).astype(dtype)  # small integers: exact in float32
    loop = [smooth_ece(p, y, column.astype(np.float64)).value for column in weights.T]
    values = SmoothEceResampler(p, y, w).values(weights)
    # 4000 rows, fewer than the finest grid's points: split onto each width's grid directly
    # (test_resampler_below_sigma_0_01_equals_a_loop has more, split onto the finest and split
    # again); float32 ones are split and smoothed in float32 and, BASIS_ROWS or more at one
    # width, read through its mesh basis (the service's path)
    np.testing.assert_allclose(values, loop, rtol=RESAMPLED_RTOL, atol=0)


@pytest.mark.parametrize("n", [3000, 6000])  # split onto each grid; onto the finest, then again
def test_consistency_resamples_equal_a_loop_of_smooth_ece(n: int) -> None:
    p, y, w = weighted_batch(21, n, 1.0)
    labels = (np.random.default_rng(22).random((p.size, 25)) < p[:, None]).astype(np.float64)
    loop = [smooth_ece(p, column, w).value for column in labels.T]
    values = SmoothEceResampler(p, y, w).values(None, labels)
    np.testing.assert_allclose(values, loop, rtol=RESAMPLED_RTOL, atol=0)
    single = SmoothEceResampler(p, y, w).values(None, labels.astype(np.float32))
    np.testing.assert_allclose(single, loop, rtol=RESAMPLED_RTOL, atol=0)


def test_resampler_below_sigma_0_01_equals_a_loop() -> None:
    p, y, w = weighted_batch(23, 60_000, 1.0)
    weights = np.random.default_rng(24).poisson(1.0, (p.size, 6)) * w[:, None]
    loop = [smooth_ece(p, y, column) for column in weights.T]
    assert sum(result.sigma < 0.01 for result in loop) >= 3  # finer grids, mixed with 1001
    values = SmoothEceResampler(p, y, w).values(weights)
    np.testing.assert_allclose(values, [r.value for r in loop], rtol=RESAMPLED_RTOL, atol=0)


@pytest.mark.parametrize("rows", [200, BASIS_ROWS - 1])
@pytest.mark.parametrize(
    "sigma",
    # 20 / 2002.5: a grid of 1002 points, even, whose kernel is half a step off centre
    [1.0, 0.5, 0.25, 0.1, 0.0625, 0.03, 0.0125, 20 / 2002.5, 0.006],
)
def test_single_precision_mesh_reading_equals_the_whole_transform(sigma: float, rows: int) -> None:
    """The float32 reading, through the width's :func:`mesh_basis` (the kept frequencies only;
    from BASIS_ROWS rows) or the transform, against the float64 inverse transform of the whole
    period, on the grids of resamples' residuals: within 1e-5 of the largest smoothed value,
    float32's own noise; the basis itself too, where there is one."""
    p, y, w = weighted_batch(29, 2000, 1.2)
    kernel = reflected_gaussian(sigma)
    counts = np.random.default_rng(30).poisson(1.0, (p.size, rows)) * w[:, None]
    residuals = (counts * (p - y)[:, None]).T
    residual = split_onto_grid(p, lambda r: list(residuals[:, r]), kernel.size)
    residual = residual.astype(np.float32)
    spectra = reflected_spectra(residual)
    whole = np.fft.irfft(spectra.astype(np.float64) * kernel.spectrum, 2 * kernel.size - 2)
    exact = whole[:, kernel.cell] * (1 - kernel.frac) + whole[:, kernel.cell + 1] * kernel.frac
    tolerance = 1e-5 * np.abs(exact).max()
    np.testing.assert_allclose(kernel.on_mesh(spectra), exact, rtol=0, atol=tolerance)
    basis = mesh_basis(kernel)
    assert (basis is None) == (sigma == 0.006)  # 0.006 keeps too many frequencies: the transform
    if basis is not None:
        assert basis.shape[1] == kernel.mesh
        product = spectra[:, : basis.shape[0]] @ basis
        np.testing.assert_allclose(product, exact, rtol=0, atol=tolerance)


@pytest.mark.parametrize("k", range(2, 11))
def test_finest_grid_split_again_approximates_each_widths_own(k: int) -> None:
    """Every width below 0.01 the search examines (k / 1024) has its own grid; the finest
    grid's split onto it keeps every row's weight and mean position, equals the direct
    split where the coarse points are fine ones, and moves the smooth ECE by under 3e-4."""
    p, y, w = weighted_batch(27, 50_000, 1.0)
    sigma = k / 1024
    size = grid_size(sigma)

    def values(rows: slice) -> list[np.ndarray]:
        return [w[rows], w[rows] * (p[rows] - y[rows])]

    ones, residual = _coarsened(tuple(split_onto_grid(p, values, FINEST_GRID)[:, None]), size)
    direct = split_onto_grid(p, values, size)
    points = np.linspace(0.0, 1.0, size)
    np.testing.assert_allclose(ones.sum(), w.sum(), rtol=1e-12)
    np.testing.assert_allclose(ones @ points, (w * p).sum(), rtol=1e-12)
    np.testing.assert_allclose(residual @ points, (w * (p - y) * p).sum(), rtol=1e-9)
    if (FINEST_GRID - 1) % (size - 1) == 0:
        np.testing.assert_allclose(ones[0], direct[0], rtol=0, atol=1e-9)
    one = np.zeros(1, np.intp)
    exact = smooth_eces(
        np.array([sigma]), one, lambda *_: (direct[:1], reflected_spectra(direct[1:]))
    )
    split_again = smooth_eces(
        np.array([sigma]), one, lambda *_: (ones, reflected_spectra(residual))
    )
    assert split_again[0] == pytest.approx(exact[0], rel=3e-4)


@pytest.mark.parametrize("sigma", [0.05, 0.006])
def test_resampled_curves_equal_a_loop_of_smooth_curve(sigma: float) -> None:
    p, y, w = weighted_batch(25, 3000, 1.4)
    weights = np.random.default_rng(26).poisson(1.0, (p.size, 12)) * w[:, None]
    loop = [smooth_curve(p, y, column, sigma).mu for column in weights.T]
    curves = SmoothEceResampler(p, y, w).curves(weights, sigma)
    np.testing.assert_allclose(curves, loop, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    ("p", "y", "w", "where"),
    [
        ([0.2, 1.5], [0, 1], None, r"^probabilities: must lie in \[0, 1\]"),
        ([0.2, np.nan], [0, 1], None, r"^probabilities\[1\]: must be finite"),
        ([0.2, 0.4], [0, 2], None, r"^labels\[1\]: must be 0 or 1"),
        ([0.2, 0.4], [0, 1, 1], None, r"^labels: has 3 values"),
        ([0.2, 0.4], [0, 1], [1, -1], r"^sample_weight\[1\]: must be finite and >= 0"),
        ([0.2, 0.4], [0, 1], [0, 0], r"^sample_weight: the weights must have a positive sum"),
        ([], [], None, r"^probabilities: the batch is empty"),
    ],
)
def test_invalid_inputs_name_their_field(p: list, y: list, w: list | None, where: str) -> None:
    weights = None if w is None else np.array(w, dtype=float)
    for measure in (
        lambda: smooth_ece(np.array(p, dtype=float), np.array(y, dtype=float), weights),
        lambda: smooth_curve(np.array(p, dtype=float), np.array(y, dtype=float), weights, 0.1),
    ):
        with pytest.raises(CalibrationError, match=where):
            measure()


def test_invalid_width_and_mesh_name_their_field() -> None:
    p, y = batch(28, 50)
    for sigma in (0.0, -0.1, float("nan"), 0.0005):
        with pytest.raises(CalibrationError, match=r"^sigma: "):
            smooth_ece_at(p, y, None, sigma)
    with pytest.raises(CalibrationError, match=r"^mesh: "):
        smooth_curve(p, y, None, 0.1, mesh=1)
