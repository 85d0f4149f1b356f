"""What :mod:`app.ui.signin` imports from here until it imports :mod:`app.ui.page_responses`
itself (that module is another branch's; the name changed on this one)."""

from .page_responses import error_page, sessions_of

__all__ = ["error_page", "sessions_of"]
