"""Save the README's picture of ``/docs`` from a running service, as headless Chromium shows it
offline: ``python -m docs.screenshot_docs [BASE_URL]`` from the repository's root, with
``make run`` serving (default ``http://127.0.0.1:8000``). Writes ``docs/api-docs.png``
(1280 x 900). Needs Debian's ``chromium`` (``make chromium``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.browser import find_chromium, screenshot

PICTURE = Path(__file__).resolve().parent / "api-docs.png"


def main(argv: list[str]) -> None:
    """Screenshot ``{BASE_URL}/docs`` into :data:`PICTURE`."""
    base = (argv[0] if argv else "http://127.0.0.1:8000").rstrip("/")
    binary = find_chromium()
    if binary is None:
        raise SystemExit("chromium is not installed: make chromium")
    screenshot(f"{base}/docs", PICTURE, size=(1280, 900), binary=binary)
    print(f"wrote {PICTURE}")


if __name__ == "__main__":
    main(sys.argv[1:])
