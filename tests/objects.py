"""A real S3 API server for the tests: moto's, in server mode, on a loopback port of this
pytest process (:mod:`tests.ports`), and a fresh bucket per test.

boto3 in the service (and in its worker processes, which inherit the environment) finds the
server through ``CALIBRATION_BLOB_ENDPOINT_URL`` and the fake :data:`CREDENTIALS`, which
``tests/conftest.py`` puts in the environment, as it would find AWS's through the usual
variables.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3

from tests.ports import free_port

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
_buckets = itertools.count()


@contextmanager
def s3_server() -> Iterator[str]:
    """moto's S3 server on loopback while in the block; its endpoint URL."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def s3_client(endpoint: str) -> Any:
    """A boto3 S3 client of the test server."""
    return boto3.client("s3", endpoint_url=endpoint)


def new_bucket(endpoint: str) -> str:
    """A bucket of its own for one test (named apart from every other of this process)."""
    name = f"blobs-{os.getpid()}-{next(_buckets)}"
    s3_client(endpoint).create_bucket(Bucket=name)
    return name


def drop_bucket(endpoint: str, bucket: str) -> None:
    """Empty and delete ``bucket`` (a test may have deleted it already)."""
    client = s3_client(endpoint)
    try:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for entry in page.get("Contents", ()):
                client.delete_object(Bucket=bucket, Key=entry["Key"])
        client.delete_bucket(Bucket=bucket)
    except client.exceptions.NoSuchBucket:
        pass
