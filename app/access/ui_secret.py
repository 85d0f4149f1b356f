"""What a web view secret (``CALIBRATION_UI_SECRET``) must be: long, varied, not the
placeholder. A short or repetitive secret can be guessed offline from one session cookie, and
then forges sessions; the placeholder of ``.env.example`` is public."""

from __future__ import annotations

MIN_UI_SECRET_CHARACTERS = 32
MIN_UI_SECRET_DISTINCT = 10
"""Different characters a UI secret holds at least (``'a' * 32`` has one; a
``secrets.token_urlsafe(32)`` about 30)."""
PLACEHOLDER_MARK = "change-me"
"""What .env.example's placeholders hold; a secret that holds it is refused."""
_HOW_TO_MAKE_ONE = "(`python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"


def check_ui_secret(secret: str) -> None:
    """Raise ValueError, saying how to make a good one, unless ``secret`` is fit to sign."""
    if len(secret) < MIN_UI_SECRET_CHARACTERS:
        raise ValueError(
            f"ui_secret must have at least {MIN_UI_SECRET_CHARACTERS} characters {_HOW_TO_MAKE_ONE}"
        )
    if PLACEHOLDER_MARK in secret.lower():
        raise ValueError(f"ui_secret is still the placeholder of .env.example {_HOW_TO_MAKE_ONE}")
    if len(set(secret)) < MIN_UI_SECRET_DISTINCT:
        raise ValueError(
            f"ui_secret must hold at least {MIN_UI_SECRET_DISTINCT} different characters, "
            f"not a repeated pattern {_HOW_TO_MAKE_ONE}"
        )
