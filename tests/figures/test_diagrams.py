"""The reliability diagram: exact image sizes, identifiable SVG, odd inputs, determinism."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from PIL import Image

from app.calibration.measures.metrics import summarize
from app.calibration.measures.reliability import Bins
from app.calibration.measures.report import Report
from app.figures.reliability import render_reliability_diagram

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SVG = "{http://www.w3.org/2000/svg}"
TITLE = "churn v3 · isotonic · n = 10000"


def _reports(
    n: int = 10_000, n_bins: int = 10, strategy: str = "uniform", seed: int = 0
) -> tuple[Report, Report]:
    """(calibrated, raw) reports: raw scores squeezed towards the centre, as boosting does."""
    rng = np.random.default_rng(seed)
    p = rng.beta(2.0, 5.0, n)
    y = (rng.random(n) < p).astype(np.float64)
    raw = 1.0 / (1.0 + np.exp(-3.0 * (p - 0.3)))
    return (
        summarize(p, y, n_bins=n_bins, strategy=strategy),
        summarize(raw, y, n_bins=n_bins, strategy=strategy),
    )


def _render(calibrated: Any, raw: Any, image_format: Any = "png", **size: int) -> bytes:
    return render_reliability_diagram(
        calibrated, raw, title=TITLE, image_format=image_format, **size
    )


def _svg_root(data: bytes) -> ET.Element:
    return ET.fromstring(data)


@pytest.mark.parametrize(("width", "height"), [(800, 900), (640, 480), (1133, 777)])
def test_png_has_exactly_the_requested_pixels(width: int, height: int) -> None:
    data = _render(*_reports(), width_px=width, height_px=height)
    assert data.startswith(PNG_SIGNATURE)
    with Image.open(io.BytesIO(data)) as image:
        assert image.format == "PNG"
        assert image.size == (width, height)


def test_png_size_holds_at_another_dpi() -> None:
    data = _render(*_reports(), width_px=113, height_px=201, dpi=100)  # 113/100*100 < 113
    with Image.open(io.BytesIO(data)) as image:
        assert image.size == (113, 201)
    data = _render(*_reports(), width_px=640, height_px=480, dpi=72)
    with Image.open(io.BytesIO(data)) as image:
        assert image.size == (640, 480)


def test_svg_names_every_part_and_carries_the_title() -> None:
    root = _svg_root(_render(*_reports(), image_format="svg"))
    assert root.tag == f"{SVG}svg"
    assert root.get("width") == "576pt"  # 800 px at 100 dpi = 8 in
    assert root.get("height") == "648pt"
    ids = {element.get("id") for element in root.iter()}
    expected = {"diagonal", "calibrated-curve", "raw-curve", "histogram"}
    expected |= {"calibrated-interval", "raw-interval", "calibrated-histogram", "raw-histogram"}
    assert expected | {"metrics", "reliability"} <= ids
    texts = ["".join(element.itertext()) for element in root.iter(f"{SVG}text")]
    assert TITLE in texts
    assert any("ECE 0.0" in text for text in texts)


def _emptied(report: Report) -> Report:
    """The report with every bin empty (count 0, NaN statistics) and no metrics."""
    bins = report.bins
    nan = np.full(bins.lower.size, np.nan)
    return Report(
        Bins(
            bins.lower,
            bins.upper,
            np.zeros_like(bins.count),
            0 * bins.weight,
            nan,
            nan,
            nan,
            nan,
            nan,
        ),
        {},
    )


def test_the_curves_skip_empty_bins() -> None:
    calibrated, raw = _reports(n_bins=20)
    empty = int((calibrated.bins.count == 0).sum())
    assert empty > 0  # beta(2, 5) leaves the top bins empty
    root = _svg_root(_render(calibrated, raw, image_format="svg"))
    curve = next(e for e in root.iter() if e.get("id") == "calibrated-curve")
    markers = list(curve.iter(f"{SVG}use"))
    assert len(markers) == 20 - empty


def test_all_empty_bins_render() -> None:
    calibrated, raw = (_emptied(report) for report in _reports())
    png = _render(calibrated, raw, width_px=640, height_px=480)
    with Image.open(io.BytesIO(png)) as image:
        assert image.size == (640, 480)
    root = _svg_root(_render(calibrated, raw, image_format="svg"))
    ids = {element.get("id") for element in root.iter()}
    assert {"diagonal", "calibrated-curve", "raw-curve", "histogram"} <= ids
    assert "metrics" not in ids


def test_no_bins_at_all_render() -> None:
    calibrated, _ = _reports()
    none = np.zeros(0)
    nothing = Report(
        Bins(none, none, np.zeros(0, np.int64), none, none, none, none, none, none), {}
    )
    assert _render(calibrated, nothing).startswith(PNG_SIGNATURE)
    assert _render(nothing, nothing, "svg").lstrip().startswith(b"<?xml")


def test_a_single_non_empty_bin_renders() -> None:
    p = np.full(50, 0.42)
    y = (np.arange(50) < 20).astype(np.float64)
    report = summarize(p, y, n_bins=10)
    assert int((report.bins.count > 0).sum()) == 1
    assert _render(report, report).startswith(PNG_SIGNATURE)
    root = _svg_root(_render(report, report, "svg"))
    curve = next(e for e in root.iter() if e.get("id") == "calibrated-curve")
    assert len(list(curve.iter(f"{SVG}use"))) == 1


def test_quantile_bins_of_unequal_and_zero_width_render() -> None:
    calibrated, raw = _reports(n_bins=20, strategy="quantile")
    widths = set(np.round(calibrated.bins.upper - calibrated.bins.lower, 6))
    assert len(widths) > 5
    assert _render(calibrated, raw, width_px=640, height_px=480).startswith(PNG_SIGNATURE)
    # tied predictions (isotonic output is piecewise constant) give bins of zero width
    rng = np.random.default_rng(1)
    p = np.round(rng.beta(2.0, 5.0, 5000), 1)
    y = (rng.random(5000) < p).astype(np.float64)
    tied = summarize(p, y, n_bins=20, strategy="quantile")
    assert np.any(tied.bins.upper == tied.bins.lower)
    root = _svg_root(_render(tied, raw, "svg"))
    assert any(e.get("id") == "calibrated-histogram" for e in root.iter())


def _histogram_labels(data: bytes) -> set[str]:
    panel = next(e for e in _svg_root(data).iter() if e.get("id") == "histogram")
    return {"".join("".join(text.itertext()).split()) for text in panel.iter(f"{SVG}text")}


def test_counts_spanning_decades_use_a_log_scale() -> None:
    rng = np.random.default_rng(2)
    p = np.concatenate([rng.uniform(0.0, 0.1, 20_000), rng.uniform(0.9, 1.0, 10)])
    y = (rng.random(p.size) < p).astype(np.float64)
    report = summarize(p, y)  # counts 20000 and 10: a span of 2000
    # log ticks are mathtext 10^k, written as "10" and a superscript k
    assert {"100", "101", "102", "103", "104"} <= _histogram_labels(_render(report, report, "svg"))
    assert {"0", "1000", "2000", "3000"} <= _histogram_labels(_render(*_reports(), "svg"))


def test_titles_with_dollars_and_non_ascii_are_drawn_verbatim() -> None:
    title = "prix $5 $x$ · température ≥ 0,5 · Ωμέγα"
    data = render_reliability_diagram(*_reports(), title=title, image_format="svg")
    texts = ["".join(element.itertext()) for element in _svg_root(data).iter(f"{SVG}text")]
    assert title in texts


def test_rejects_an_unknown_format_and_bad_sizes() -> None:
    with pytest.raises(ValueError, match="image_format"):
        _render(*_reports(), "jpeg")
    with pytest.raises(ValueError, match="width_px"):
        _render(*_reports(), width_px=0)


@pytest.mark.parametrize("image_format", ["png", "svg"])
def test_concurrent_renders_are_identical_to_sequential_ones(image_format: str) -> None:
    """Four batches drawn one after the other, then each twice, eight at once. At a quarter
    of the default's pixels: what is compared is bytes, and a render is then a third cheaper."""

    def draw(reports: tuple[Report, Report]) -> bytes:
        return _render(*reports, image_format=image_format, width_px=400, height_px=450)

    batches = [_reports(seed=seed) for seed in range(4)]
    sequential = [draw(reports) for reports in batches]
    assert sequential[0] == draw(batches[0])  # deterministic
    assert sequential[0] != sequential[1]  # and it does depend on the data
    with ThreadPoolExecutor(max_workers=8) as pool:
        concurrent = list(pool.map(draw, batches * 2))
    assert concurrent == sequential * 2
