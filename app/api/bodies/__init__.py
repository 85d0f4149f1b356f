"""Request bodies: bytes and options in, typed arguments out. Never sees a ``Request``."""
