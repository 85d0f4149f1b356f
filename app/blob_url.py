"""``CALIBRATION_BLOB_URL``: where versions' blobs go in object storage, checked when the
settings are read (:mod:`app.store.objects` uses them)."""

from __future__ import annotations

import re

BLOB_URL = re.compile(r"s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:/(?P<prefix>[^?#]*))?")
"""A bucket named as S3 allows, and a key prefix."""
MAX_PREFIX_BYTES = 840
"""The longest prefix: S3 keys end at 1,024 bytes, and a blob's adds 71, a day of the traffic
history's 184 (a calibrator's name is at most 128 characters)."""


def check_blob_url(url: str) -> str:
    """``url`` when it is ``s3://bucket[/prefix]`` with a prefix of plain path segments (no
    empty, ``.`` or ``..`` segment, nothing unprintable) of at most
    :data:`MAX_PREFIX_BYTES`; else ValueError saying what is wrong."""
    found = BLOB_URL.fullmatch(url)
    if found is None:
        raise ValueError(f"blob_url: expected s3://bucket[/prefix], got {url[:200]!r}")
    prefix = (found["prefix"] or "").strip("/")
    if prefix and any(p in ("", ".", "..") or not p.isprintable() for p in prefix.split("/")):
        raise ValueError(
            "blob_url: the prefix must be plain path segments (no //, ., .. nor control)"
        )
    if len(prefix.encode()) > MAX_PREFIX_BYTES:
        raise ValueError(f"blob_url: the prefix is over {MAX_PREFIX_BYTES} bytes")
    return url
