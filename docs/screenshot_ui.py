"""``python docs/screenshot_ui.py``: save ``docs/ui.png``, the web view's page of a demo
calibrator as headless Chromium renders it (the first 1200 x 1600 pixels).

Runs the demo's fits (:mod:`demo.fits`) on a service of its own (temporary SQLite,
loopback) and drives the browser with :mod:`tests.browser`; needs the test extras and
Debian's ``chromium`` (``make chromium``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from demo.fits import fit_all  # noqa: E402
from demo.server import LocalService  # noqa: E402
from tests.browser import Browser, find_chromium  # noqa: E402

PICTURE = ROOT / "docs" / "ui.png"


def main() -> None:
    """Fit the demo's calibrators, open the first one's page, save :data:`PICTURE`."""
    binary = find_chromium()
    if binary is None:
        raise SystemExit("chromium is not installed: make chromium")
    service = LocalService()
    try:
        service.wait_until_ready()
        with httpx.Client(base_url=service.base_url, timeout=60) as client:
            fitted = fit_all(client)
        name = next(iter(fitted.versions))
        with Browser.start(binary, size=(1200, 1600)) as browser:
            browser.navigate(f"{service.base_url}/ui/calibrators/{name}")
            browser.screenshot(PICTURE, full_page=False)
        print(f"saved {PICTURE.relative_to(ROOT)}")
    finally:
        service.stop()


if __name__ == "__main__":
    main()
