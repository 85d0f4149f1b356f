"""Scores to the Open Inference Protocol's infer with the binary tensor data extension, and
its answer back to numpy: the JSON header first (its length in
``Inference-Header-Content-Length``), then each tensor's raw little-endian bytes. Large
batches skip JSON's text both ways; the numbers are ``/v1`` predict's to the bit."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import httpx
import numpy as np
from numpy.typing import NDArray

from calibration_client._types import Prediction

HEADER_LENGTH = "Inference-Header-Content-Length"
INPUT = "scores"
OUTPUT = "probabilities"


def infer_path(name: str, version: int | str | None) -> str:
    """The infer URL path of ``name`` at ``version`` (None: the latest)."""
    model = f"/v2/models/{quote(name, safe='')}"
    if version is not None:
        model += f"/versions/{quote(str(version), safe='')}"
    return model + "/infer"


def infer_body(scores: NDArray[np.float64]) -> tuple[bytes, dict[str, str]]:
    """The request's body and headers: ``scores`` as one FP64 binary tensor, the
    probabilities asked for as binary too."""
    data = np.ascontiguousarray(scores, dtype="<f8")
    header = {
        "inputs": [
            {
                "name": INPUT,
                "datatype": "FP64",
                "shape": list(data.shape),
                "parameters": {"binary_data_size": data.nbytes},
            }
        ],
        "outputs": [{"name": OUTPUT, "parameters": {"binary_data": True}}],
        "parameters": {"binary_data_output": True},
    }
    text = json.dumps(header, separators=(",", ":")).encode()
    headers = {"Content-Type": "application/octet-stream", HEADER_LENGTH: str(len(text))}
    return text + data.tobytes(), headers


def read_infer(name: str, response: httpx.Response) -> Prediction:
    """The prediction in an infer answer, binary or JSON tensors alike."""
    content = response.content
    length = response.headers.get(HEADER_LENGTH)
    split = len(content) if length is None else int(length)
    if not 0 <= split <= len(content):
        raise ValueError(f"{HEADER_LENGTH} is {split} but the body has {len(content)} bytes")
    header: dict[str, Any] = json.loads(content[:split])
    offset = split
    found: NDArray[np.float64] | None = None
    for output in header.get("outputs", []):
        shape = tuple(output["shape"])
        size = (output.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            if not isinstance(size, int) or size < 0 or size % 8 or offset + size > len(content):
                raise ValueError(f"output {output['name']!r} is past the body's end")
            # one copy out of the body: an owned, writable array, not a view pinning it
            values = np.frombuffer(content, "<f8", size // 8, offset).astype(np.float64)
            offset += size
        else:
            values = np.asarray(output["data"], dtype=np.float64)
        if output["name"] == OUTPUT:
            found = values.reshape(shape)
    if found is None:
        raise ValueError(f"the infer answer has no {OUTPUT!r} output")
    return Prediction(name=name, version=int(header["model_version"]), probabilities=found)
