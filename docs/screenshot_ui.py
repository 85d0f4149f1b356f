"""``python docs/screenshot_ui.py``: save ``docs/ui.png``, the web view's page of a demo
calibrator as headless Chromium renders it (the first 1200 x 1600 pixels).

Runs the demo itself (``python -m demo`` with a URL where nothing answers, so it starts a
service of its own: temporary SQLite, loopback), opens the calibrator page it prints, checks
that the page does not scroll sideways, saves the picture, then stops the demo (Ctrl-C, as a
user would). Drives the browser with :mod:`tests.browser`; needs the test extras and Debian's
``chromium`` (``make chromium``).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from demo.server import free_port  # noqa: E402
from tests.browser import Browser, find_chromium  # noqa: E402

PICTURE = ROOT / "docs" / "ui.png"
SIZE = (1200, 1600)


def main() -> None:
    """Run the demo, open its calibrator page, save :data:`PICTURE`."""
    binary = find_chromium()
    if binary is None:
        raise SystemExit("chromium is not installed: make chromium")
    nowhere = f"http://127.0.0.1:{free_port()}"
    demo = subprocess.Popen(
        [sys.executable, "-m", "demo", "--url", nowhere],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},  # its lines as it prints them
    )
    try:
        assert demo.stdout is not None
        printed = []
        for line in demo.stdout:
            printed.append(line)
            sys.stdout.write(line)
            if line.startswith("Serving until Ctrl-C"):
                break
        found = re.search(r"^calibrator:\s+(\S+)$", "".join(printed), re.M)
        if found is None:
            raise SystemExit("the demo printed no calibrator page")
        with Browser.start(binary, size=SIZE) as browser:
            browser.navigate(found[1])
            width = browser.evaluate("document.documentElement.scrollWidth")
            if width > SIZE[0]:
                raise SystemExit(f"the page scrolls sideways: {width} px wide in {SIZE[0]}")
            browser.screenshot(PICTURE, full_page=False)
        print(f"saved {PICTURE.relative_to(ROOT)}")
    finally:
        demo.send_signal(signal.SIGINT)  # the demo stops the service it started
        demo.wait(timeout=30)


if __name__ == "__main__":
    main()
