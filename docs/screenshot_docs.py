"""Save docs/api.md's picture of ``/docs`` from a running service, as headless Chromium shows it
offline: ``python -m docs.screenshot_docs [BASE_URL]`` from the repository's root, with
``make run`` serving (default ``http://127.0.0.1:8000``). Writes ``docs/api-docs.png``
(1280 x 900). Needs the test extras and Debian's ``chromium`` (``make chromium``); drives the
browser with :mod:`tests.browser`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.browser import Browser, find_chromium

PICTURE = Path(__file__).resolve().parent / "api-docs.png"


def main(argv: list[str]) -> None:
    """Screenshot ``{BASE_URL}/docs`` into :data:`PICTURE`, once Swagger UI has drawn it."""
    base = (argv[0] if argv else "http://127.0.0.1:8000").rstrip("/")
    binary = find_chromium()
    if binary is None:
        raise SystemExit("chromium is not installed: make chromium")
    with Browser.start(binary, size=(1280, 900)) as browser:
        browser.navigate(f"{base}/docs")
        browser.wait_for("document.fonts.ready.then(() => !!document.querySelector('.opblock'))")
        browser.screenshot(PICTURE, full_page=False)
    print(f"wrote {PICTURE}")


if __name__ == "__main__":
    main(sys.argv[1:])
