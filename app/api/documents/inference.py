"""The Open Inference Protocol's answers beside infer: server and model metadata, liveness and
readiness (KServe's V2 REST, Triton's HTTP API)."""

from __future__ import annotations

from pydantic import Field

from app.api.documents.base import Document


class ServerMetadata(Document):
    name: str
    version: str
    extensions: list[str] = Field(description="Protocol extensions: binary tensor data.")


class ServerLive(Document):
    live: bool


class ServerReady(Document):
    ready: bool = Field(description="Whether the database answers (503 when not).")


class TensorMetadata(Document):
    name: str
    datatype: str
    shape: list[int] = Field(description="-1: any number of rows.")


class ModelMetadata(Document):
    """A version's inputs and outputs, and the model's version numbers (the newest 1000)."""

    name: str
    versions: list[str]
    platform: str
    version: str
    method: str
    inputs: list[TensorMetadata]
    outputs: list[TensorMetadata]


class ModelReady(Document):
    name: str
    version: str
    ready: bool
