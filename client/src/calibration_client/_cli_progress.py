"""The command line's progress bar, drawn from an upload's ``progress(sent, total)``
callback (:meth:`~calibration_client.Client.fit_file`, ``predict``)."""

from __future__ import annotations

from typing import IO

PROGRESS_BYTES = 4 * 1024 * 1024
"""Uploads larger than this show a progress bar when stderr is a terminal."""


class ProgressBar:
    """A one-line bar redrawn in place on ``stream``: ``[#####-----]  50%  2.0/4.0 MB``.

    Drawn when ``always``, else for uploads over :data:`PROGRESS_BYTES` to a terminal. A
    retried upload starts a fresh bar."""

    WIDTH = 30

    def __init__(self, stream: IO[str], always: bool = False) -> None:
        self.stream = stream
        self.always = always
        self.shown = -1  # the percentage drawn last; -1 before the first

    def __call__(self, sent: int, total: int) -> None:
        if not (self.always or (total > PROGRESS_BYTES and self.stream.isatty())):
            return
        percent = 100 * sent // total if total else 100
        if percent == self.shown:
            return
        self.shown = percent
        filled = self.WIDTH * percent // 100
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        self.stream.write(f"\r[{bar}] {percent:3d}%  {sent / 1e6:.1f}/{total / 1e6:.1f} MB")
        if sent >= total:
            self.stream.write("\n")
            self.shown = -1  # a retry draws its own bar
        self.stream.flush()
