"""The container's entrypoint: ``python -m app.serve`` migrates the database, then serves
(:func:`app.server.startup.serve`: it checks the port, migrates, and runs uvicorn)."""

from __future__ import annotations


def main() -> None:
    """Migrate the configured database, then serve until SIGTERM or SIGINT."""
    from app.server.startup import serve

    serve()


if __name__ == "__main__":
    main()
