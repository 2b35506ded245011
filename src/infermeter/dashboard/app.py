"""The dashboard's FastAPI app: JSON API, static page, and a WebSocket of live events.

Live data: the store is the source of truth, and the server tells browsers what changed. A
profile or sweep in another process writes each sample (and the per-layer table so far) to the
database as it is measured; one poller in the server reads what is new every 250 ms (indexed
queries on autoincrement ids, cheap under WAL, never blocking the writer) and pushes it to every
connected page. Nothing couples the measuring process to the server: it can start before or
after, or not at all, and a page that reconnects loses nothing because everything is in the
database. (Publishing from the profiler to the server would save the poll, but would make every
run depend on a server being reachable and on its port.)
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from fastapi import FastAPI, HTTPException, Request, WebSocket, WebSocketDisconnect
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.responses import FileResponse, JSONResponse, Response

from infermeter.dashboard.live import LiveFeed, LiveSource
from infermeter.dashboard.security import COOKIE, Guard, valid_id
from infermeter.errors import UserError
from infermeter.run.sink import StoredSweeps
from infermeter.util import palette
from infermeter.util.jsonio import clean_json

if TYPE_CHECKING:
    from infermeter.analysis.history import HistoryRowDoc
    from infermeter.store.queries import PredictionRowDoc, RunRowDoc, SweepRowDoc

STATIC = Path(__file__).parent / "static"
TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".svg": "image/svg+xml",
}


def _json_doc(doc: Any) -> dict[str, Any]:
    """An API answer as strict JSON (NaN and infinities as null), typed as the object it is."""
    cleaned = clean_json(doc)
    assert isinstance(cleaned, dict)
    return cleaned


def plotly_bundle() -> Path:
    """plotly.js as the `plotly` package ships it (found without importing the package)."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or spec.origin is None:
        raise UserError(
            "the dashboard needs the plotly package for its charts: "
            "pip install 'infermeter[dashboard]'"
        )
    path = Path(spec.origin).parent / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise UserError(f"the plotly package has no {path.name} at {path.parent}: reinstall plotly")
    return path


def _static_files() -> dict[str, Path]:
    """The only files ever served: the package's static folder and plotly.js, listed once."""
    files = {p.name: p for p in STATIC.iterdir() if p.is_file() and p.suffix in TYPES}
    files["plotly.min.js"] = plotly_bundle()
    return files


class DashboardStore(StoredSweeps, LiveSource, Protocol):
    """What the dashboard reads (implemented by `infermeter.Store`); it never writes."""

    def list_sweeps(self) -> list[SweepRowDoc]:
        """Every sweep, newest first."""
        ...

    def list_runs(self, *, limit: int = 50) -> list[RunRowDoc]:
        """Newest runs first, with per-run medians, mode and knobs."""
        ...

    def measured_ceilings(self, device: str) -> Any:
        """The newest ceilings `infermeter calibrate` measured for `device` here, or None."""
        ...

    def history(
        self, model: str, since: str | None = None, limit: int = 500
    ) -> list[HistoryRowDoc]:
        """A model's finished runs, oldest first, with their samples' metrics (`history`)."""
        ...

    def list_predictions(self, limit: int = 100) -> list[PredictionRowDoc]:
        """The newest stored predictions (`predict`, `load predict`)."""
        ...

    def prediction(self, prediction_id: str) -> dict[str, Any]:
        """A stored prediction document; UserError when there is none."""
        ...


def create_app(store: DashboardStore, guard: Guard | None = None, poll_s: float = 0.25) -> FastAPI:
    """The dashboard app over `store` (an `infermeter.Store`)."""
    guard = guard or Guard()
    feed = LiveFeed(store, poll_s)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        await feed.stop()

    app = FastAPI(
        title="infermeter", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan
    )
    _add_checks(app, guard)
    # plotly.js is 4.8 MB; compressed it is a quarter of that for a dashboard served remotely
    app.add_middleware(GZipMiddleware, minimum_size=2048)
    _add_pages(app, _static_files())
    _add_api(app, store)
    _add_live(app, guard, feed, poll_s)
    return app


def _bearer(headers: Any) -> str | None:
    auth = headers.get("authorization", "")
    return auth[7:] if auth.lower().startswith("bearer ") else None


def _add_checks(app: FastAPI, guard: Guard) -> None:
    """Host and token checked on every request; security headers on every response."""

    @app.middleware("http")
    async def check(request: Request, call_next: Any) -> Response:
        if not guard.host_ok(request.headers.get("host")):
            return JSONResponse({"detail": "unknown host"}, status_code=400)
        query = request.query_params.get("token")
        if not guard.token_ok(_bearer(request.headers), request.cookies.get(COOKIE), query):
            return JSONResponse({"detail": "token required"}, status_code=401)
        response: Response = await call_next(request)
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["Content-Security-Policy"] = (
            "default-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self' ws: wss:; "
            "img-src 'self' data:; "
            "frame-ancestors 'none'"
        )
        if guard.token and query:  # remember it for the page's scripts and WebSocket
            response.set_cookie(COOKIE, guard.token, httponly=True, samesite="strict")
        return response


def _add_pages(app: FastAPI, files: dict[str, Path]) -> None:
    """The page and the package's own static files, nothing else."""

    @app.get("/")
    async def index() -> FileResponse:
        return FileResponse(files["index.html"], media_type="text/html")

    @app.get("/static/palette.js")
    async def colours() -> Response:
        body = f"window.PALETTE = {json.dumps(palette.as_json())};\n"
        return Response(body, media_type="text/javascript")

    @app.get("/static/{name:path}")
    async def static(name: str) -> FileResponse:
        path = files.get(name)
        if path is None:
            raise HTTPException(404, "not found")
        return FileResponse(path, media_type=TYPES[path.suffix])


def _id(value: str) -> str:
    if not valid_id(value):
        raise HTTPException(404, "not found")
    return value


def _add_api(app: FastAPI, store: DashboardStore) -> None:
    """JSON of runs and sweeps; store calls run in a thread so the loop never blocks."""

    @app.get("/api/runs")
    async def runs(limit: int = 100) -> dict[str, Any]:
        rows = await asyncio.to_thread(store.list_runs, limit=max(1, min(limit, 1000)))
        return _json_doc({"runs": rows})

    @app.get("/api/runs/{run_id}")
    async def run(run_id: str) -> dict[str, Any]:
        rid = _id(run_id)
        try:
            result = await asyncio.to_thread(store.get, rid)
        except UserError:
            raise HTTPException(404, "no such run") from None
        return _json_doc({**result.to_json(), "timeline": result.timeline()})

    @app.get("/api/predictions")
    async def predictions(limit: int = 100) -> dict[str, Any]:
        rows = await asyncio.to_thread(store.list_predictions, max(1, min(limit, 1000)))
        return _json_doc({"predictions": rows})

    @app.get("/api/predictions/{prediction_id}")
    async def prediction(prediction_id: str) -> dict[str, Any]:
        pid = _id(prediction_id)
        try:
            return _json_doc(await asyncio.to_thread(store.prediction, pid))
        except UserError:
            raise HTTPException(404, "no such prediction") from None

    @app.get("/api/sweeps")
    async def sweeps() -> dict[str, Any]:
        return _json_doc({"sweeps": await asyncio.to_thread(store.list_sweeps)})

    @app.get("/api/sweeps/{sweep_id}")
    async def sweep(sweep_id: str) -> dict[str, Any]:
        from infermeter.run.sweep import stored_sweep

        sid = _id(sweep_id)
        try:
            return _json_doc(await asyncio.to_thread(stored_sweep, store, sid))
        except UserError:
            raise HTTPException(404, "no such sweep") from None

    @app.get("/api/history")
    async def history(model: str, metric: str = "tpot_ms") -> dict[str, Any]:
        from infermeter.analysis.history import METRICS, history

        if metric not in METRICS or not 0 < len(model) <= 500:
            raise HTTPException(400, f"metric must be one of {', '.join(METRICS)}")
        rows = await asyncio.to_thread(store.history, model)
        return _json_doc({"model": model, **history(rows, metric)})

    _add_run_views(app, store)


async def _get(store: DashboardStore, run_id: str) -> Any:
    try:
        return await asyncio.to_thread(store.get, _id(run_id))
    except UserError:
        raise HTTPException(404, "no such run") from None


def _add_run_views(app: FastAPI, store: DashboardStore) -> None:
    """What the run and compare pages show beyond the run's JSON.

    The analysis (roofline and findings), the Perfetto trace as a download, and the
    comparison of runs with verdicts.
    """

    @app.get("/api/runs/{run_id}/analysis")
    async def analysis(run_id: str) -> dict[str, Any]:
        from infermeter.analysis.analyze import analyze_run

        run = await _get(store, run_id)
        device = str((run.device or {}).get("name"))
        measured = await asyncio.to_thread(store.measured_ceilings, device)
        return _json_doc(await asyncio.to_thread(analyze_run, run, measured))

    @app.get("/api/runs/{run_id}/trace")
    async def trace(run_id: str) -> JSONResponse:
        from infermeter.report.trace import chrome_trace

        run = await _get(store, run_id)
        doc = await asyncio.to_thread(chrome_trace, run)
        name = f"trace-{run.run_id}.json"
        return JSONResponse(doc, headers={"Content-Disposition": f'attachment; filename="{name}"'})

    @app.get("/api/compare")
    async def compare(runs: str) -> dict[str, Any]:
        """The first run against each of the others, and every run with its samples.

        Runs are listed in the order given (a run given twice is listed twice), for overlays.
        """
        from infermeter.analysis.compare import compare_runs

        ids = [x for x in runs.split(",") if x]
        if not 2 <= len(ids) <= 8:
            raise HTTPException(400, "give 2 to 8 run ids: ?runs=BASE,VARIANT[,...]")
        loaded = [await _get(store, i) for i in ids]
        base = loaded[0]
        try:  # a run with nothing to compare (no measured sample) is the request's fault
            docs = [await asyncio.to_thread(compare_runs, base, v) for v in loaded[1:]]
        except UserError as exc:
            raise HTTPException(400, exc.line()) from None
        listed = [
            {
                "run_id": r.run_id,
                "model": r.model_info.get("spec"),
                "knobs": r.knobs,
                "samples": [
                    {
                        "sample_id": s.index,
                        "ttft_ms": s.ttft_ms,
                        "tpot_ms": s.tpot_ms,
                        "total_ms": s.total_ms,
                    }
                    for s in r.measured
                ],
            }
            for r in loaded
        ]
        return _json_doc({"comparisons": docs, "runs": listed})


def _add_live(app: FastAPI, guard: Guard, feed: LiveFeed, poll_s: float) -> None:
    """The live WebSocket: host, origin and token checked before it is accepted."""

    @app.websocket("/ws/live")
    async def live(ws: WebSocket) -> None:
        token = ws.query_params.get("token")
        if (
            not guard.host_ok(ws.headers.get("host"))
            or not guard.origin_ok(ws.headers.get("origin"))
            or not guard.token_ok(_bearer(ws.headers), ws.cookies.get(COOKIE), token)
        ):
            await ws.close(code=1008)
            return
        await ws.accept()
        queue = await feed.subscribe()
        try:
            await ws.send_json({"type": "hello", "poll_ms": int(poll_s * 1000)})
            while True:
                event = await queue.get()
                await ws.send_json(clean_json(event))
        except (WebSocketDisconnect, RuntimeError):
            pass
        except asyncio.CancelledError:
            # the server is stopping (Ctrl-C) with this page still open: uvicorn cancels the
            # handler after its grace period; end it quietly, not with a traceback on stderr
            with contextlib.suppress(Exception):
                await ws.close(code=1001)
        finally:
            feed.unsubscribe(queue)
