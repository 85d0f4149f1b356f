"""``python -m demo [--url URL] [--key KEY] [--no-wait]``: fit the demo's calibrators on a
running service (``make run``'s by default) or on one started here, and print where to look.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from types import FrameType

import httpx

from .server import LocalService, answers

DEFAULT_URL = "http://127.0.0.1:8000"


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM (``kill``, or make passing on its own) stops the demo as Ctrl-C does."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Run the demo; 0 when every fit and alias was stored."""
    started = time.perf_counter()
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__)
    parser.add_argument("--url", default=os.environ.get("URL") or DEFAULT_URL)
    parser.add_argument(
        "--key",
        default=os.environ.get("DEMO_KEY") or os.environ.get("KEY") or None,
        help="a write key, when the service has keys (default: $DEMO_KEY or $KEY)",
    )
    parser.add_argument(
        "--no-wait", action="store_true", help="exit after printing (stops a service started here)"
    )
    args = parser.parse_args(argv)
    base_url = args.url.rstrip("/")
    own = None
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        if not answers(base_url):
            own = LocalService()
            print(f"No service answers at {base_url}: starting one at {own.base_url} with a")
            print(f"temporary SQLite database in {own.directory} (it stops when the demo does).")
        # scikit-learn's import and the models' training (part of the demo's time) run while
        # a service started here starts: seconds that need not wait for each other.
        from .fits import ALIAS, fit_all, links, scored_batches

        batches = scored_batches()
        if own is not None:
            own.wait_until_ready()
            base_url = own.base_url
        headers = {"Authorization": f"Bearer {args.key}"} if args.key else {}
        with httpx.Client(base_url=base_url, headers=headers, timeout=60) as client:
            try:
                fitted = fit_all(client, batches)
            except httpx.HTTPStatusError as exc:
                print(f"the service refused: {exc.response.status_code} {exc.response.text}")
                return 1
        print()
        for name, versions in fitted.versions.items():
            listed = ", ".join(f"v{v} {method}" for method, v in versions.items())
            print(f"{name}: {listed}; {ALIAS} -> v{versions['auto']}")
        print()
        for label, url in links(base_url, fitted).items():
            print(f"{label + ':':<12} {url}")
        if args.key:  # a browser's session opens /ui only
            print("(the diagram's /v1 URL takes the key as a Bearer header; /ui shows it too)")
        print(f"\nThe demo took {time.perf_counter() - started:.1f} s.")
        if own is not None and not args.no_wait:
            print("Serving until Ctrl-C.")
            try:
                while own.process.poll() is None:
                    time.sleep(0.5)
            except KeyboardInterrupt:
                print()
        return 0
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the clean-up
        if own is not None:
            own.stop()
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM before the demo was done; cleaned up already
        sys.exit(130)
