"""Our own SVG figures (:mod:`app.figures.reliability`) made fit to stand inside an HTML page.

The figures are generated here, from stored numbers, with matplotlib, which escapes the text it
writes (names follow the calibrator-name pattern anyway): inlining them is safe. What changes
is what would clash with the page: the XML prologue and the metadata go, the ``<style>``
element goes (its ``*`` rule would style the whole document), every id gets the figure's
prefix (several figures on one page share ids such as ``diagonal``, and their clip paths'),
and the root gets ``role="img"``, an ``aria-label`` and a ``<title>``.
"""

from __future__ import annotations

import re

from markupsafe import Markup, escape

_PROLOGUE_END = "<svg"
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)
_STYLE = re.compile(r"<style[^>]*>.*?</style>\s*", re.DOTALL)
_ID = re.compile(r'\bid="([^"]+)"')
_REFERENCE = re.compile(r'url\(#([^)]+)\)|((?:xlink:)?href)="#([^"]+)"')
_ROOT = re.compile(r"<svg\b([^>]*)>")
_PREFIX = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,40}$")


def inline_svg(svg: bytes, *, prefix: str, label: str) -> Markup:
    """``svg`` as an element to place in a page: ids prefixed with ``prefix`` (a letter,
    then letters, digits or dashes), described by ``label`` for assistive technology."""
    if not _PREFIX.match(prefix):
        raise ValueError(f"prefix: must be a letter then letters, digits or dashes ({prefix!r})")
    text = svg.decode("utf-8")
    text = text[text.index(_PROLOGUE_END) :]
    text = _METADATA.sub("", text)
    text = _STYLE.sub("", text)
    text = _ID.sub(lambda m: f'id="{prefix}-{m[1]}"', text)
    text = _REFERENCE.sub(lambda m: _reference(m, prefix), text)
    described = escape(label)
    root = _ROOT.match(text)
    if root is None:
        raise ValueError("svg: no root element")
    opening = (
        f'<svg{root[1]} role="img" aria-label="{described}" class="diagram" focusable="false">'
        f"<title>{described}</title>"
    )
    return Markup(opening + text[root.end() :])


def _reference(match: re.Match[str], prefix: str) -> str:
    if match[1] is not None:
        return f"url(#{prefix}-{match[1]})"
    return f'{match[2]}="#{prefix}-{match[3]}"'
