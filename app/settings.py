"""The service's settings, read from the environment (prefix ``CALIBRATION_``) and ``.env``."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.access.api_keys import ApiKey, check_unique, is_loopback, parse_api_keys
from app.access.forwarded import check_forwarded_allow_ips
from app.access.ui_secret import check_ui_secret
from app.blob_url import check_blob_url

DEFAULT_SQLITE_PATH = Path("data") / "calibration.db"

UiSignIn = Literal["open", "shared-secret", "process-secret", "off"]


class Settings(BaseSettings):
    """Every knob of the service; each one is ``CALIBRATION_<NAME>`` in the environment."""

    # hide_input_in_errors: a refused value may hold a password or a raw API key.
    model_config = SettingsConfigDict(
        env_prefix="CALIBRATION_", env_file=".env", extra="ignore", hide_input_in_errors=True
    )

    database_url: str = Field(
        default=f"sqlite:///{DEFAULT_SQLITE_PATH}",
        description="SQLAlchemy URL: sqlite:///path or postgresql+psycopg://user:pw@host/db.",
    )
    blob_url: str | None = Field(
        default=None,
        description="s3://bucket[/prefix]: versions' artifacts and fitting batches go to this "
        "bucket, content-addressed by sha256, and the database keeps their keys; unset: in the "
        "database. Region and credentials the usual AWS way (AWS_REGION, AWS_ACCESS_KEY_ID, …).",
    )
    blob_endpoint_url: str | None = Field(
        default=None, description="The S3 API's endpoint if not AWS's (AWS_ENDPOINT_URL works too)."
    )

    @field_validator("blob_url")
    @classmethod
    def _check_blob_url(cls, value: str | None) -> str | None:
        return None if value is None else check_blob_url(value)

    db_pool_size: int = Field(default=5, ge=1, le=100)
    db_connect_timeout_seconds: float = Field(default=5.0, gt=0, le=300)
    db_statement_timeout_seconds: float = Field(default=30.0, gt=0, le=3600)
    db_pool_timeout_seconds: float = Field(
        default=10.0, gt=0, le=300, description="How long a request waits for a free connection."
    )
    cv_folds: int = Field(
        default=5, ge=2, le=20, description="Folds of the out-of-sample diagnostics."
    )
    cv_jobs: int = Field(
        default=1, ge=-1, le=64, description="joblib workers for cross-validation folds."
    )
    cv_parallel_min_samples: int = Field(
        default=200_000, ge=0, description="Batches smaller than this run their folds serially."
    )
    max_batch_rows: int = Field(
        default=10_000_000,
        ge=1,
        description="Rows (or scores) one request may send: fit, predict, diagnostics, compare.",
    )
    max_concurrent_fits: int = Field(
        default=2,
        ge=1,
        le=64,
        description="CPU-heavy jobs (parsing a batch, fitting, diagnostics, pictures, compare) "
        "running at once per server process, each in a worker process of its own.",
    )
    max_queued_fits: int = Field(
        default=10_000,
        ge=0,
        le=1_000_000,
        description="Jobs waiting for one of those at most; past that, 503 with Retry-After. "
        "What bounds waiting work first is queue_memory_mb.",
    )
    queue_memory_mb: int = Field(
        default=1024,
        ge=1,
        description="Bytes of request bodies that waiting and running jobs may hold in a server "
        "process; a job that would pass it is refused with 503 and Retry-After.",
    )
    work_processes: bool = Field(
        default=True,
        description="Run fits, reports, pictures, compare and exports in worker processes; "
        "false runs them in threads of the server process (for debugging).",
    )
    job_memory_mb: int = Field(
        default=4096,
        ge=256,
        description="Memory one job may take (the worker process's data limit); a job that "
        "needs more stops with 413 and stores nothing.",
    )
    worker_memory_mb: int = Field(
        default=512,
        ge=64,
        description="A worker process whose resident memory is above this after a job is "
        "replaced, so the memory of a large job goes back to the system (a worker that ran a "
        "large job and ran another would hold the first's heap, fragmented, plus the second's).",
    )
    worker_max_jobs: int = Field(
        default=1000, ge=1, description="A worker process is replaced after this many jobs."
    )
    worker_idle_seconds: float = Field(
        default=10.0, gt=0, le=3600, description="A worker process idle this long exits."
    )
    fit_timeout_seconds: float = Field(
        default=300.0,
        gt=0,
        le=86_400,
        description="A job's time budget; past it the job stops, stores nothing, answers 503.",
    )
    fit_key_lease_seconds: float = Field(
        default=10.0,
        ge=0.5,
        le=600,
        description="How long a fit's claim of its Idempotency-Key holds without renewal (it is "
        "renewed every fifth of this while the fit runs): a retry of a fit whose server died "
        "waits this long before it fits.",
    )
    max_body_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    latest_refresh_seconds: float = Field(
        default=1.0, ge=0, le=60, description="How stale `latest` may be on a replica."
    )
    log_level: str = Field(default="info")
    log_format: Literal["json", "text"] = Field(
        default="json", description="Log lines as one JSON object each, or as readable text."
    )
    host: str = Field(default="127.0.0.1", description="Address `python -m app.serve` binds.")
    port: int = Field(default=8000, ge=1, le=65535, description="Port `python -m app.serve` binds.")
    workers: int = Field(default=2, ge=1, le=64, description="uvicorn worker processes.")
    header_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description="A connection that has not sent complete request headers this long after "
        "it opened, or after the previous response, is closed (slow or idle clients).",
    )
    keep_alive_seconds: int = Field(
        default=5,
        ge=1,
        le=300,
        description="uvicorn's keep-alive: an idle connection is closed this long after a "
        "response (header_timeout_seconds closes it sooner when smaller).",
    )
    shutdown_grace_seconds: int = Field(
        default=30,
        ge=1,
        le=3600,
        description="After SIGTERM, requests in flight may run this long, then are answered "
        "503 shutting-down; keep it below the orchestrator's grace period.",
    )
    traffic_buffer_rows: int = Field(
        default=100_000,
        ge=1,
        le=10_000_000,
        description="Logged predictions held in memory while the database is slow or down; "
        "past it they are dropped and counted (calibration_traffic_dropped_total).",
    )
    traffic_retention_days: float = Field(
        default=30.0,
        gt=0,
        le=3650,
        description="Logged predictions (and outcomes still waiting for theirs) older than this "
        "are deleted, in bounded batches, every few minutes.",
    )
    traffic_hot_days: int = Field(
        default=7, ge=1, description="With blob_url: older days of the log go there as Parquet."
    )
    traffic_flush_seconds: float = Field(
        default=1.0,
        gt=0,
        le=1.0,
        description="Logged predictions are written at least this often (at most the last "
        "this-many seconds are lost when a process dies).",
    )
    traffic_flush_rows: int = Field(
        default=5000,
        ge=1,
        le=1_000_000,
        description="A flush starts early once this many logged predictions wait.",
    )
    live_metrics_seconds: float = Field(
        default=60.0,
        ge=0,
        le=86_400,
        description="How often the live calibration gauges (calibration_live_*, "
        "calibration_traffic_psi) are computed, off the scrape; 0 never.",
    )
    live_metrics_window: Literal["1h", "1d", "7d"] = Field(
        default="1h",
        description="The window the live gauges describe: each calibrator's most recent "
        "complete one, aligned as the monitoring route's.",
    )
    live_metrics_max_calibrators: int = Field(
        default=100,
        ge=1,
        le=10_000,
        description="Calibrators the live gauges cover at most, in name order; the others "
        "are counted in calibration_live_skipped_calibrators.",
    )
    body_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        le=300,
        description="A request body that sends nothing for this long is answered 408; a "
        "response the client reads none of for this long is abandoned.",
    )
    body_min_rate_bytes: int = Field(
        default=10_000,
        ge=0,
        description="Past its first body_timeout_seconds, a request body must average this many "
        "bytes a second (a second more for each that-many bytes received), else 408; 0: no "
        "minimum.",
    )
    forwarded_allow_ips: str = Field(
        default="127.0.0.1",
        description="Comma-separated proxy addresses or networks (or `*`) whose "
        "X-Forwarded-For and X-Forwarded-Proto are trusted; anyone else's are ignored.",
    )
    api_keys: Annotated[tuple[ApiKey, ...], NoDecode] = Field(
        default=(),
        description="Comma-separated name:scope:sha256hex entries (`python -m app.keys`).",
    )
    auth: Literal["enabled", "disabled"] = Field(
        default="enabled",
        description="`disabled` serves everything without keys, on any host: say so explicitly.",
    )

    ui_secret: SecretStr | None = Field(
        default=None,
        description="Signs the web view's session cookies (/ui): at least 32 characters of "
        "some variety, the same on every replica and worker (`python -c 'import secrets; "
        "print(secrets.token_urlsafe(32))'`). Unset: a random secret per process, which serves "
        "one worker on a loopback address; elsewhere the web view refuses to sign in (the API "
        "is unaffected).",
    )

    @field_validator("ui_secret")
    @classmethod
    def _check_ui_secret(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            check_ui_secret(value.get_secret_value())
        return value

    @property
    def ui_sign_in(self) -> UiSignIn:
        """How the web view signs its sessions: ``open`` (no keys), ``shared-secret``
        (``CALIBRATION_UI_SECRET``), ``process-secret`` (none set, one worker on loopback: a
        random secret of the process) or ``off`` (none set otherwise: a process's secret would
        fail on the others, so sign-in is refused, and only that; the API serves as ever)."""
        if self.auth == "disabled" or not self.api_keys:
            return "open"
        if self.ui_secret is not None:
            return "shared-secret"
        if is_loopback(self.host) and self.workers == 1:
            return "process-secret"
        return "off"

    @field_validator("api_keys", mode="before")
    @classmethod
    def _parse_api_keys(cls, value: Any) -> tuple[ApiKey, ...]:
        if isinstance(value, str):
            return parse_api_keys(value)
        if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            return parse_api_keys(",".join(value))
        keys = tuple(value)
        check_unique(keys)
        return keys

    @field_validator("forwarded_allow_ips")
    @classmethod
    def _check_forwarded_allow_ips(cls, value: str) -> str:
        return check_forwarded_allow_ips(value)

    @model_validator(mode="after")
    def _refuse_open_on_a_network(self) -> Settings:
        # Open without keys is a convenience for a developer's loopback, never a default
        # for an address others can reach.
        if self.auth == "enabled" and not self.api_keys and not is_loopback(self.host):
            raise ValueError(
                f"refusing to serve on {self.host} without API keys: set CALIBRATION_API_KEYS "
                "(`python -m app.keys` prints a key and its entry), bind a loopback address, "
                "or set CALIBRATION_AUTH=disabled to serve without authentication on purpose"
            )
        return self


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return Settings()
