# The calibration service: `python -m app.serve` migrates CALIBRATION_DATABASE_URL, then serves
# on port 8000. Build: docker build -t calibration-service .   (see "Running with Docker" in
# docs/operations.md; docker-compose.yml runs it with PostgreSQL behind nginx).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# A fixed, unprivileged uid/gid. It owns only data/ (below): the code stays read-only to it.
RUN groupadd --system --gid 10001 calibration \
    && useradd --system --uid 10001 --gid calibration --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin calibration

WORKDIR /srv/calibration

# The project's own metadata first, so the dependency layer is rebuilt only when they change.
COPY pyproject.toml README.md ./
COPY app/ app/
COPY migrations/ migrations/
# The runtime dependencies as pyproject.toml declares them (no test extra), and the bytecode of
# the tree that runs: the user below cannot write __pycache__ there. data/ is its one writable
# directory, for the default SQLite database (mount a volume there to keep it).
RUN pip install --no-cache-dir . \
    && python -m compileall -q app migrations \
    && mkdir data && chown 10001:10001 data

# Run from the source tree (not site-packages): app.store.migrate finds pyproject.toml's
# [tool.alembic] and migrations/ beside app/.
ENV PYTHONPATH=/srv/calibration \
    CALIBRATION_HOST=0.0.0.0 \
    CALIBRATION_PORT=8000 \
    CALIBRATION_WORKERS=2

USER 10001:10001
EXPOSE 8000

# slim has no curl: ask /healthz with the standard library.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(f\"http://127.0.0.1:{os.environ.get('CALIBRATION_PORT', '8000')}/healthz\", timeout=2)"]

# Exec form: python is PID 1 and receives docker stop's SIGTERM (graceful shutdown for up to
# CALIBRATION_SHUTDOWN_GRACE_SECONDS, 30 s by default).
ENTRYPOINT ["python", "-m", "app.serve"]
