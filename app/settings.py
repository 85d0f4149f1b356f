"""The service's settings, read from the environment (prefix ``CALIBRATION_``) and ``.env``."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.auth import ApiKey, check_unique, is_loopback, parse_api_keys

DEFAULT_SQLITE_PATH = Path("data") / "calibration.db"


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
    max_batch_rows: int = Field(default=10_000_000, ge=1)
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
    api_keys: Annotated[tuple[ApiKey, ...], NoDecode] = Field(
        default=(),
        description="Comma-separated name:scope:sha256hex entries (`python -m app.keys`).",
    )
    auth: Literal["enabled", "disabled"] = Field(
        default="enabled",
        description="`disabled` serves everything without keys, on any host: say so explicitly.",
    )

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
