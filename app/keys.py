"""``python -m app.keys [--name NAME] [--scope read|log|write]``: a new API key and its entry.

The key goes to the client (it is shown once and stored nowhere); the entry, which holds only
the key's SHA-256, goes into ``CALIBRATION_API_KEYS`` (comma-separated, one per client).
"""

from __future__ import annotations

import argparse
import secrets
import sys

from app.access.api_keys import NAME_PATTERN, SCOPES, ApiKey, key_digest, scope_named


def new_key(name: str, scope: str) -> tuple[str, ApiKey]:
    """A fresh random key (256 bits, URL-safe) and the configured entry that accepts it."""
    if not NAME_PATTERN.match(name):
        raise ValueError(f"the name must be 1-64 of A-Z a-z 0-9 . _ - (got {name!r})")
    known = scope_named(scope)
    if known is None:
        raise ValueError(f"the scope must be one of {', '.join(SCOPES)} (got {scope!r})")
    key = secrets.token_urlsafe(32)
    return key, ApiKey(name, known, key_digest(key))


def main(argv: list[str] | None = None) -> None:
    """Print a new key and its ``name:scope:sha256`` entry."""
    parser = argparse.ArgumentParser(prog="python -m app.keys", description=__doc__)
    parser.add_argument("--name", default="client", help="who holds the key (shown in logs)")
    parser.add_argument(
        "--scope",
        choices=SCOPES,
        default="read",
        help="read; log: also predictions logged under ids (a model server's); write: everything. "
        "Default: read",
    )
    args = parser.parse_args(argv)
    try:
        key, entry = new_key(args.name, args.scope)
    except ValueError as exc:
        parser.error(str(exc))
    print(f"key:   {key}")
    print(f"entry: {entry.entry()}")
    print(
        "Give the key to the client (Authorization: Bearer <key>); add the entry to "
        "CALIBRATION_API_KEYS (comma-separated).",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
