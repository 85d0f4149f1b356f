"""The one path of a predict's and an infer's answer: the routes run it off the event loop
(a body may hold millions of scores), the hot path (:mod:`app.api.fast_predict`) inline for
small bodies of versions in memory. Both answer the same, to the bit."""

from __future__ import annotations

from typing import Any, Literal, overload

import numpy as np
import orjson
from starlette.types import Scope

from app.api.bodies.media import PredictArgs, chosen_threshold
from app.api.bodies.tensors import (
    InferRequest,
    decompressed,
    encode_infer,
    parse_infer,
)
from app.api.deps import parse_selector
from app.api.places import Places, invalid, placing
from app.api.security import may_log_predictions
from app.calibration import CAPABILITIES
from app.errors import InvalidInput
from app.service.use_cases import CalibrationService


@overload
def answer_predict(
    service: CalibrationService,
    name: str,
    args: PredictArgs,
    version: str | None,
    intervals: bool | None,
    asgi: Scope,
    *,
    threshold: float | None = None,
    cached_only: Literal[False] = False,
) -> bytes: ...
@overload
def answer_predict(
    service: CalibrationService,
    name: str,
    args: PredictArgs,
    version: str | None,
    intervals: bool | None,
    asgi: Scope,
    *,
    threshold: float | None = None,
    cached_only: Literal[True],
) -> bytes | None: ...
def answer_predict(
    service: CalibrationService,
    name: str,
    args: PredictArgs,
    version: str | None,
    intervals: bool | None,
    asgi: Scope,
    *,
    threshold: float | None = None,
    cached_only: bool = False,
) -> bytes | None:
    """The answer to a parsed predict request (``version``, ``intervals`` and
    ``threshold`` from its query; ``asgi``, the request's scope, says whose key sent it):
    checked against its query and its key (ids need a key that may log), predicted, written
    as JSON.

    The one predict path: the route runs it off the event loop (a body may hold millions of
    scores); the hot path (:mod:`app.api.fast_predict`) runs it inline for small bodies with
    ``cached_only``, and hands the request to the route when it gives None (with the body as
    parsed, :data:`~app.api.deps.PARSED_BODY`) or raises.
    """
    if args.version is not None and version is not None and args.version != version:
        raise invalid(("body", "version"), f"is {args.version!r} but the query says {version!r}")
    if args.intervals is not None and intervals is not None and args.intervals != intervals:
        flags = (str(flag).lower() for flag in (args.intervals, intervals))
        raise invalid(("body", "intervals"), "is {} but the query says {}".format(*flags))
    if version == "":  # as the body's version may not be
        raise invalid(("query", "version"), "must be a version number, 'latest' or an alias")
    cut = chosen_threshold(args.threshold, threshold, args.scores)
    may_log_predictions(asgi, args.ids)
    given = args.version if args.version is not None else version
    selector = parse_selector(name, "latest" if given is None else given)
    asked = bool(args.intervals or intervals)
    where = Places({} if args.intervals else {"intervals": "query"})
    with placing(where):
        prediction = service.serving.predict(
            name, selector, args.scores, intervals=asked, ids=args.ids, cached_only=cached_only
        )
    if prediction is None:
        return None
    answer: dict[str, Any] = {
        "name": name,
        "version": prediction.version,
        "probabilities": prediction.probabilities,
    }
    if prediction.intervals is not None:
        answer["intervals"] = prediction.intervals
    if prediction.logged is not None:
        answer["logged"] = prediction.logged
    if cut is not None:
        answer["decisions"] = (prediction.probabilities > cut).astype(np.int8)
    return orjson.dumps(answer, option=orjson.OPT_SERIALIZE_NUMPY)


Answer = tuple[bytes, dict[str, str], str]
"""A response's body, extra headers and media type."""


def parse_infer_body(
    service: CalibrationService, body: bytes, encoding: str | None, header_length: str | None
) -> InferRequest:
    """An infer body, inflated (inflating a compressed body is work too: off the event loop)
    and parsed as JSON or binary tensors."""
    inflated = decompressed(body, encoding, service.settings.max_body_bytes)
    return parse_infer(inflated, header_length, service.settings.max_batch_rows)


@overload
def answer_infer(
    service: CalibrationService,
    name: str,
    version: str,
    request: InferRequest,
    asgi: Scope,
    *,
    cached_only: Literal[False] = False,
) -> Answer: ...
@overload
def answer_infer(
    service: CalibrationService,
    name: str,
    version: str,
    request: InferRequest,
    asgi: Scope,
    *,
    cached_only: Literal[True],
) -> Answer | None: ...
def answer_infer(
    service: CalibrationService,
    name: str,
    version: str,
    request: InferRequest,
    asgi: Scope,
    *,
    cached_only: bool = False,
) -> Answer | None:
    """A parsed infer request's answer (``asgi``: the request's scope, whose key may or may
    not log the ids). The one infer path: the route runs it off the event
    loop, and the hot path (:mod:`app.api.fast_predict`) with ``cached_only``, which gives
    None when the version is not in memory (the route then answers, from the body as the hot
    path parsed it: :data:`~app.api.deps.PARSED_BODY`)."""
    may_log_predictions(asgi, request.ids)
    selector = parse_selector(name, version)
    asked = request.outputs
    if cached_only:
        cached = service.version_cache.cached(name, selector)
        if cached is None:
            return None
        loaded = cached
    else:
        loaded = service.serving.resolve(name, selector)
    available = ["probabilities", *(["p0", "p1"] if CAPABILITIES[loaded.method].intervals else [])]
    wanted = list(asked) if asked is not None else available
    for i, output in enumerate(wanted):
        if output not in available:
            raise invalid(
                ("outputs", i, "name"),
                f"is {output!r}, which {name!r} v{loaded.version} ({loaded.method}) does not give",
            )
    intervals = bool({"p0", "p1"} & set(wanted))
    try:
        prediction = service.serving.predict(
            name,
            loaded.version,
            request.scores,
            intervals=intervals,
            ids=request.ids,
            cached_only=cached_only,
        )
    except InvalidInput as exc:
        raise _located(exc) from None
    if prediction is None:
        return None
    shape = request.shape if request.scores.ndim == 1 else prediction.probabilities.shape
    arrays = {"probabilities": prediction.probabilities.reshape(shape)}
    if prediction.intervals is not None:
        arrays["p0"] = prediction.intervals[..., 0].reshape(shape)
        arrays["p1"] = prediction.intervals[..., 1].reshape(shape)
    header: dict[str, Any] = {"model_name": name, "model_version": str(prediction.version)}
    if request.id is not None:
        header["id"] = request.id
    if prediction.logged is not None:
        header["parameters"] = {"logged": prediction.logged}
    outputs = []
    for output in wanted:
        binary = asked.get(output) if asked is not None else None
        outputs.append(
            (output, arrays[output], request.binary_default if binary is None else binary)
        )
    return encode_infer(header, outputs)


def _located(exc: InvalidInput) -> InvalidInput:
    """A refusal of the scores, located as the protocol's client sent them: ``inputs[0]``
    and the row, where the service names ``scores[row]``."""
    found = exc.errors[0] if exc.errors else None
    if found is None or found.loc[:1] != ("scores",):
        return exc
    places = zip(("row", "column"), found.loc[1:], strict=False)  # a row, maybe a column
    where = ", ".join(f"{what} {at}" for what, at in places)
    return invalid(("inputs", 0), f"{f'{where}: ' if where else ''}{found.msg}")
