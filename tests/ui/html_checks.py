"""Reading the web view's HTML in tests: the elements a check needs, with html.parser."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class Element:
    """A start tag: its name, attributes, and the text inside it until it closes."""

    tag: str
    attrs: dict[str, str]
    text: str = ""


@dataclass
class Parsed:
    """Every start tag of a page in order; ``text`` the page's text."""

    elements: list[Element] = field(default_factory=list)
    text: str = ""

    def all(self, tag: str) -> list[Element]:
        """The elements named ``tag``."""
        return [e for e in self.elements if e.tag == tag]


class _Reader(HTMLParser):
    VOID = frozenset({"input", "img", "link", "meta", "br", "hr", "path", "use", "rect"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parsed = Parsed()
        self.open: list[Element] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.parsed.elements.append(element)
        if tag not in self.VOID:
            self.open.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.parsed.elements.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.open) - 1, -1, -1):
            if self.open[i].tag == tag:
                del self.open[i:]
                break

    def handle_data(self, data: str) -> None:
        self.parsed.text += data
        for element in self.open:
            element.text += data


def parse(html: str) -> Parsed:
    """The elements and text of ``html``."""
    reader = _Reader()
    reader.feed(html)
    reader.close()
    return reader.parsed


def table_rows(parsed: Parsed, caption: str) -> list[list[str]]:
    """The rows of the table whose caption starts with ``caption``: each one's cells' texts,
    whitespace collapsed (the header row too)."""
    elements = parsed.elements
    start = next(
        i
        for i, e in enumerate(elements)
        if e.tag == "caption" and " ".join(e.text.split()).startswith(caption)
    )
    rows: list[list[str]] = []
    for element in elements[start + 1 :]:
        if element.tag in ("table", "caption", "h2", "h3", "section", "p"):
            break
        if element.tag == "tr":
            rows.append([])
        elif element.tag in ("th", "td") and rows:
            rows[-1].append(" ".join(element.text.split()))
    return rows
