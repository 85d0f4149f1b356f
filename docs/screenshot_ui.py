"""``python docs/screenshot_ui.py [--out DIR]``: a PNG of every page of the web view, as
headless Chromium renders it 1280 px wide, from a demo run with a day of synthetic traffic.

Starts a service of its own (:class:`demo.server.LocalService`: ``python -m app.serve`` on a
free loopback port, a SQLite database in a temporary folder) with one API key, so that the key
form is a page too; fits the demo's calibrators (:func:`demo.fits.fit_all`); writes a day of
their ``production`` versions' traffic and outcomes (:mod:`docs.ui_traffic`); then signs in
with the key form and saves each page of :data:`PAGES` into ``DIR`` (default ``docs/ui``):
the whole page, at most :data:`MAX_HEIGHT` px of it, in 256 colours. A page that answers
another status than its own stops the run; one that scrolls sideways at 1280 px, or has a
region that does (a wide table's), fails it once every picture is saved. The service and the
browser are stopped on the way out, also after a failure, Ctrl-C or SIGTERM. Drives the
browser with :mod:`tests.browser`; needs the test and demo extras and Debian's ``chromium``
(``make chromium``).
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from PIL import Image  # noqa: E402

from app.keys import new_key  # noqa: E402
from demo.fits import ALIAS, fit_all, scored_batches  # noqa: E402
from demo.server import LocalService  # noqa: E402
from docs.ui_traffic import log_a_day  # noqa: E402
from tests.browser import Browser, find_chromium  # noqa: E402

WIDTH = 1280
FIRST_HEIGHT = 400
"""The window a page is opened in; a shorter page is shot this tall."""
MAX_HEIGHT = 2400
"""The most of a page a picture keeps, so that the files stay small."""
NAME = "breast-cancer-naive-bayes"
PAGES = {
    "list.png": ("/ui", 200),
    "calibrator.png": (f"/ui/calibrators/{NAME}", 200),
    "compare.png": (f"/ui/calibrators/{NAME}/compare?a=1&b={ALIAS}", 200),
    "monitoring.png": (f"/ui/calibrators/{NAME}/monitoring?window=1h", 200),
    "not-found.png": ("/ui/calibrators/no-such-calibrator", 404),
}
"""The pictures saved after signing in, and the page and status of each."""
KEY_PAGE = "key.png"
"""The picture of the key form, which ``/ui`` shows first."""
SIDEWAYS = """[document.documentElement, ...document.querySelectorAll('*')].filter(e =>
  e.scrollWidth > e.clientWidth + 1 && (e === document.documentElement
    || ['auto', 'scroll'].includes(getComputedStyle(e).overflowX)))
  .map(e => (e === document.documentElement ? 'the page' : e.getAttribute('aria-label')
    || document.getElementById(e.getAttribute('aria-labelledby'))?.textContent.trim()
    || e.tagName.toLowerCase())
    + ` scrolls sideways: ${e.scrollWidth} px wide in ${e.clientWidth}`)"""
"""What scrolls sideways in the page: the page itself, or a region of it (a wide table's)."""
STATUS = "performance.getEntriesByType('navigation')[0].responseStatus"


def shrink(path: Path) -> None:
    """Rewrite the PNG at ``path`` with a palette of 256 colours, without dithering: a page's
    flat colours and anti-aliased text look the same, in about a third of the bytes."""
    with Image.open(path) as picture:
        fewer = picture.convert("RGB").quantize(256, dither=Image.Dither.NONE)
    fewer.save(path, optimize=True)


def save(browser: Browser, path: Path, status: int = 200) -> list[str]:
    """Save the page the browser shows as ``path``: as tall as the page, at most
    :data:`MAX_HEIGHT`; SystemExit when it did not answer ``status``. What scrolls sideways
    in it (:data:`SIDEWAYS`), each line naming the page."""
    url = browser.evaluate("location.href")
    answered = browser.evaluate(STATUS)
    if answered != status:
        raise SystemExit(f"{url} answered {answered}, not {status}")
    height = min(browser.evaluate("document.documentElement.scrollHeight"), MAX_HEIGHT)
    browser.resize((WIDTH, height))
    try:
        browser.screenshot(path, full_page=False)
        shrink(path)
        wide: list[str] = browser.evaluate(SIDEWAYS)
    finally:
        browser.resize((WIDTH, FIRST_HEIGHT))  # the next page is measured from the first window
    print(f"saved {path} ({WIDTH} x {height}, {path.stat().st_size // 1024} KiB): {url}")
    return [f"{path.name}: {line}" for line in wide]


def shoot(binary: str, base_url: str, key: str, out: Path) -> list[str]:
    """Open ``/ui`` without a session (the key form), sign in with ``key``, save every page;
    what scrolls sideways in them."""
    with Browser.start(binary, size=(WIDTH, FIRST_HEIGHT)) as browser:
        landed = browser.navigate(f"{base_url}/ui")
        if not landed.startswith(f"{base_url}/ui/key"):
            raise SystemExit(f"/ui showed no key form: it led to {landed}")
        wide = save(browser, out / KEY_PAGE)
        signed_in = browser.submit("key", key)
        if signed_in != f"{base_url}/ui":
            raise SystemExit(f"signing in led to {signed_in}, not back to /ui")
        for picture, (page, status) in PAGES.items():
            browser.navigate(base_url + page)
            wide += save(browser, out / picture, status)
    return wide


def main(argv: list[str] | None = None) -> None:
    """Serve, fit, log a day of traffic, save the pictures, stop."""
    parser = argparse.ArgumentParser(prog="python docs/screenshot_ui.py", description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "ui", help="default docs/ui")
    out: Path = parser.parse_args(argv).out
    binary = find_chromium()
    if binary is None:
        raise SystemExit("chromium is not installed: make chromium")
    out.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM cleans up as Ctrl-C
    key, entry = new_key("screenshots", "write")
    with tempfile.TemporaryDirectory(prefix="ui-screenshots-") as folder:
        database_url = f"sqlite:///{folder}/demo.db"
        service = LocalService(database_url, CALIBRATION_API_KEYS=entry.entry())
        try:
            batches = scored_batches()  # trains the models while the service starts
            service.wait_until_ready()
            with httpx.Client(
                base_url=service.base_url,
                headers={"Authorization": f"Bearer {key}"},
                timeout=60,
                trust_env=False,  # no proxy: loopback only
            ) as client:
                fit_all(client, batches)
                log_a_day(client, database_url, batches)
            wide = shoot(binary, service.base_url, key, out)
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut it short
            service.stop()
    if wide:  # every picture is saved, to show where
        raise SystemExit("\n".join([f"Too wide for {WIDTH} px:", *wide]))


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: everything started is stopped already
        sys.exit(130)
