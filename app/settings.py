"""The service's settings, read from the environment (prefix ``CALIBRATION_``) and ``.env``."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_SQLITE_PATH = Path("data") / "calibration.db"


class Settings(BaseSettings):
    """Every knob of the service; each one is ``CALIBRATION_<NAME>`` in the environment."""

    model_config = SettingsConfigDict(env_prefix="CALIBRATION_", env_file=".env", extra="ignore")

    database_url: str = Field(
        default=f"sqlite:///{DEFAULT_SQLITE_PATH}",
        description="SQLAlchemy URL: sqlite:///path or postgresql+psycopg://user:pw@host/db.",
    )
    db_pool_size: int = Field(default=5, ge=1, le=100)
    db_connect_timeout_seconds: float = Field(default=5.0, gt=0, le=300)
    db_statement_timeout_seconds: float = Field(default=30.0, gt=0, le=3600)
    cv_folds: int = Field(
        default=5, ge=2, le=20, description="Folds of the out-of-sample diagnostics."
    )
    cv_jobs: int = Field(
        default=1, ge=-1, le=64, description="joblib workers for cross-validation folds."
    )
    cv_parallel_min_samples: int = Field(
        default=200_000, ge=0, description="Batches smaller than this run their folds serially."
    )
    max_batch_rows: int = Field(default=10_000_000, ge=1)
    max_body_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    latest_refresh_seconds: float = Field(
        default=1.0, ge=0, le=60, description="How stale `latest` may be on a replica."
    )
    log_level: str = Field(default="info")
    host: str = Field(default="127.0.0.1", description="Address `python -m app.serve` binds.")
    port: int = Field(default=8000, ge=1, le=65535, description="Port `python -m app.serve` binds.")
    workers: int = Field(default=2, ge=1, le=64, description="uvicorn worker processes.")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return Settings()
