"""The rules of the house that import-linter cannot check (docs/architecture.md): modules stay
small, and below ``app/api`` no error names the place of a field in the request."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from app.api.places import PLACES

APP = Path(__file__).resolve().parents[1] / "app"
MAX_LINES = 300
BELOW_THE_API = (
    "service",
    "store",
    "calibration",
    "figures",
    "export",
    "access",
    "observability",
    "errors.py",
    "settings.py",
)


def test_no_module_is_over_300_lines() -> None:
    long = {
        str(path.relative_to(APP)): n
        for path in APP.rglob("*.py")
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


@pytest.mark.parametrize("room", BELOW_THE_API)
def test_below_the_api_a_field_is_named_without_its_place(room: str) -> None:
    """ "body", "query", "form", "path" and "header" name places in a request: only app/api
    places a field (app/api/places.py), so no string below it says one."""
    found = []
    paths = [APP / room] if room.endswith(".py") else (APP / room).rglob("*.py")
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in PLACES:
                found.append(f"{path.relative_to(APP)}:{node.lineno} {node.value!r}")
    assert found == []
