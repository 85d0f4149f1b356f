"""The floor for one-score predict over HTTP: a FastAPI endpoint that echoes a sigmoid.

Served by ``bench.http`` under exactly the uvicorn configuration of the real service.
"""

from __future__ import annotations

import math

import orjson
from fastapi import FastAPI, Request
from starlette.responses import Response

app = FastAPI()


@app.get("/healthz")
async def healthz() -> Response:
    """Liveness, for the benchmark's start-up wait."""
    return Response(b'{"status":"ok"}', media_type="application/json")


@app.post("/predict")
async def predict(request: Request) -> Response:
    """``{"scores": [f]}`` -> ``{"probabilities": [1 / (1 + e^-f)]}``."""
    score = float(orjson.loads(await request.body())["scores"][0])
    body = orjson.dumps({"probabilities": [1.0 / (1.0 + math.exp(-score))]})
    return Response(body, media_type="application/json")
