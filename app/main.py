"""The application factory: ``uvicorn app.main:app``."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI
from starlette.routing import BaseRoute

from app import __version__
from app.api.bodies import json_process
from app.api.fast_predict import FastPredict
from app.api.problems import install_problem_handlers
from app.api.request_id import RequestIdMiddleware
from app.api.request_log import install_observability
from app.api.routes import (
    adjustments,
    aliases,
    artifacts,
    calibrators,
    compare,
    diagnostics,
    estimates,
    health,
    inference,
    monitoring_table,
    predictions,
    traffic,
)
from app.api.routes.docs import docs_routes
from app.api.security import install_authentication
from app.api.shutdown import AnswerCancelled
from app.observability import configure_logging
from app.server.supervisor import end_with_supervisor
from app.service.traffic.live import start_live_metrics
from app.service.use_cases import CalibrationService
from app.service.workers import preload, start_soon
from app.settings import Settings, get_settings
from app.store import Database
from app.ui import pages, problem_pages
from app.ui.page_responses import install_error_pages
from app.ui.routes import web_view_routes

DESCRIPTION = """
Fit **named calibrators** on batches of (score, label) pairs, keep every fit as an immutable
numbered version, map raw scores to calibrated probabilities, and look at reliability
diagrams computed out of sample. Errors are `application/problem+json` (RFC 9457); each
error's `type` is a page of this service that explains it (all of them: [/problems](/problems)).
"""


# The modules of the jobs run in worker processes, imported once by the fork server they
# come from (app.service.workers), with what their pictures and exports load on first use
# (matplotlib, onnx): this process never imports those, a new worker has them already.
preload(
    *(
        module.__name__
        for module in (adjustments, artifacts, calibrators, compare, diagnostics, traffic, pages)
    ),
    "app.figures.monitoring",
    "app.figures.reliability",
    "app.export.exporter",
)


ROUTERS: tuple[APIRouter, ...] = (  # the API's, and the problem types' pages
    calibrators.router,
    predictions.router,
    estimates.router,
    adjustments.router,
    diagnostics.router,
    aliases.router,
    compare.router,
    artifacts.router,
    monitoring_table.router,
    traffic.router,
    health.router,
    inference.router,
    problem_pages.router,
)


def routes() -> list[BaseRoute]:
    """Every route of the service, in the order they are matched.

    The routers' routes are taken as they are, built once when their modules were imported:
    ``include_router`` would build each of them again, on its first request, for every app it
    is included in (~30 ms an app, which the tests pay for each app they make).
    """
    return [
        *(route for router in ROUTERS for route in router.routes),
        *docs_routes(),
        *web_view_routes(),
    ]


def create_app(settings: Settings | None = None, database: Database | None = None) -> FastAPI:
    """Build the service; ``database`` lets tests hand in one they created."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db = database or Database(settings.database_url, settings)
        app.state.settings = settings
        app.state.service = CalibrationService(db, settings)
        app.state.live_metrics = start_live_metrics(app.state.service, settings)
        end_with_supervisor()
        if settings.work_processes:
            start_soon()  # the workers' fork server imports while the server starts
        # What start-up built lives as long as the process: keep it out of the collector's
        # full passes, which otherwise stall the event loop for ~0.1 s now and then.
        gc.freeze()
        try:
            yield
        finally:
            if app.state.live_metrics is not None:
                app.state.live_metrics.close()
            app.state.service.close()
            json_process.close()
            if database is None:
                db.dispose()

    configure_logging(settings.log_level, settings.log_format)
    app = FastAPI(
        title="Calibration service",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # docs_routes() serve /docs and /redoc from local assets, not a CDN
        redoc_url=None,
        routes=routes(),
    )
    app.state.settings = settings
    install_problem_handlers(app)
    app.add_middleware(FastPredict, service=lambda: getattr(app.state, "service", None))
    install_authentication(app, settings)  # added after the hot path, so it runs before it
    app.add_middleware(AnswerCancelled)  # inside the request id, which its 503 carries too
    app.add_middleware(RequestIdMiddleware)
    install_observability(app)  # last added, so outermost: it sees every response
    install_error_pages(app)  # after the problem handlers, which it wraps for /ui
    return app


app = create_app()
