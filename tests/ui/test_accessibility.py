"""Every page of the web view is plain, accessible HTML: a language, a title, one h1, a skip
link, labelled inputs and selects, described figures, scoped table headers, no script, nothing
loaded from elsewhere; and the stylesheet's text colours contrast with its backgrounds."""

from __future__ import annotations

import re

import pytest

from app.figures.panels import (
    BACKGROUND_COLOUR,
    CALIBRATED_COLOUR,
    RAW_COLOUR,
    VERSION_COLOURS,
)
from app.ui.templating import STATIC
from tests.client import TestClient

from .html_checks import Parsed, parse

PAGES = [
    "/ui",
    "/ui?tag=team:risk",
    "/ui/calibrators/churn",
    "/ui/calibrators/churn?version=1&curve=binned",
    "/ui/calibrators/churn/compare",
    "/ui/calibrators/churn/compare?a=1&b=nope",
    "/ui/calibrators/churn/monitoring",
    "/ui/calibrators/nope",
    "/ui/nothing",
    "/ui/static/nothing.css",
    "/problems",
    "/problems/not-found",
]


def check_page(parsed: Parsed, path: str) -> None:
    """Assert the properties every page has."""
    (html,) = parsed.all("html")
    assert html.attrs.get("lang") == "en", path
    title = parsed.all("title")[0]  # the document's (each figure has its own)
    assert title.text.strip().endswith("· Calibration service"), path
    assert len(parsed.all("h1")) == 1, path
    assert parsed.all("a")[0].attrs.get("href") == "#main", f"{path}: no skip link first"
    assert any(e.attrs.get("id") == "main" for e in parsed.all("main")), path
    assert not parsed.all("script"), path
    assert not parsed.all("iframe"), path
    labels = {e.attrs.get("for") for e in parsed.all("label")}
    for field in [*parsed.all("input"), *parsed.all("select")]:
        if field.attrs.get("type") != "hidden":
            field_id = field.attrs.get("id")
            assert field_id, f"{path}: {field.tag} without an id"
            assert field_id in labels, f"{path}: {field.tag} without a label"
    for image in parsed.all("img"):
        assert image.attrs.get("alt"), f"{path}: img without alt"
    for figure in parsed.all("svg"):
        if figure.attrs.get("role") == "img":
            assert figure.attrs.get("aria-label"), f"{path}: svg without aria-label"
    roots = [e for e in parsed.elements if e.tag == "svg"]
    described = [e for e in roots if e.attrs.get("role") == "img"]
    assert len(described) == len(roots), f"{path}: an svg without role=img"
    for cell in parsed.all("th"):
        assert cell.attrs.get("scope") in ("col", "row"), f"{path}: th without scope"
    for element in parsed.elements:
        for name in ("href", "src", "action", "xlink:href"):
            value = element.attrs.get(name, "")
            assert not re.match(r"^(?:[a-z]+:)?//", value, re.I), f"{path}: external {value}"
            assert not value.lower().startswith(("javascript:", "data:text")), path
        assert not any(name.startswith("on") for name in element.attrs), f"{path}: handler"


@pytest.mark.parametrize("path", PAGES)
def test_every_page_is_accessible_html(shared_shown: TestClient, path: str) -> None:
    page = shared_shown.get(path)
    assert page.status_code in (200, 404), page.text[:300]
    check_page(parse(page.text), path)


def test_the_key_form_is_accessible_html(keyed_client: TestClient) -> None:
    page = keyed_client.get("/ui/key?next=%2Fui")
    parsed = parse(page.text)
    check_page(parsed, "/ui/key")
    (field,) = parsed.all("input")
    assert field.attrs["type"] == "password"
    form = {"content-type": "application/x-www-form-urlencoded"}
    wrong = keyed_client.post("/ui/key", content="key=wrong", headers=form)
    check_page(parse(wrong.text), "/ui/key (refused)")


def luminance(colour: str) -> float:
    """WCAG 2.1 relative luminance of ``#rrggbb``."""
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    """WCAG 2.1 contrast ratio of two colours."""
    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_contrast_of_the_stylesheet_is_at_least_4_5() -> None:
    css = (STATIC / "ui.css").read_text()
    palette = dict(re.findall(r"--([a-z-]+):\s*(#[0-9a-fA-F]{6})", css))
    texts = {"text", "muted", "link", "problem"}
    backgrounds = {"background", "panel", "chip"}
    assert texts | backgrounds <= palette.keys()
    for text in texts:
        for background in backgrounds:
            ratio = contrast(palette[text], palette[background])
            assert ratio >= 4.5, (text, background, round(ratio, 2))
    declared = re.findall(r"(?<![-\w])(?:color|background):\s*([^;]+);", css)
    assert declared
    assert all(value.strip().startswith("var(--") for value in declared), declared
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)  # the formula itself


def test_the_stylesheet_loads_nothing_from_elsewhere(shared_shown: TestClient) -> None:
    css = shared_shown.get("/ui/static/ui.css")
    assert css.status_code == 200
    assert css.headers["content-type"].startswith("text/css")
    assert "url(" not in css.text
    assert "@import" not in css.text


def test_the_diagrams_colours_contrast_with_their_background_at_least_3_to_1() -> None:
    """WCAG 2.1, 1.4.11: the curves, markers and bar outlines are graphics a reader needs."""
    for colour in (CALIBRATED_COLOUR, RAW_COLOUR, *VERSION_COLOURS):
        ratio = contrast(colour, BACKGROUND_COLOUR)
        assert ratio >= 3.0, (colour, round(ratio, 2))
    assert len(set(VERSION_COLOURS)) == len(VERSION_COLOURS)


def test_the_diagrams_draw_with_those_colours(shared_shown: TestClient) -> None:
    svg = shared_shown.get("/v1/calibrators/churn/versions/1/diagnostics.svg").text.lower()
    assert CALIBRATED_COLOUR in svg
    assert RAW_COLOUR in svg
    assert "#ff7f0e" not in svg
    compared = shared_shown.get("/ui/calibrators/churn/compare", params={"a": "1", "b": "2"}).text
    assert all(colour in compared.lower() for colour in VERSION_COLOURS[:2])
