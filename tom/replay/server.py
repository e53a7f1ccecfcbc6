"""``tom replay RUN_DIR``: the dashboard over a finished run, no peer running.

The page is the live dashboard's own (`tom/web/dashboard`), opened as ``/?replay``: it fetches
``/api/replay`` once (the run's peers, order and every event, `tom.replay.feed.dashboard_events`) and
draws the run up to the time its slider says. Loopback unless a host is given; read-only (no POST).
"""

from __future__ import annotations

import json

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..web.api import DASHBOARD, allowed_hosts
from .feed import MAX_REPLAY_EVENTS, dashboard_events
from .run import Run


def replay_payload(run: Run, limit: int = MAX_REPLAY_EVENTS) -> bytes:
    """What ``/api/replay`` serves: the run's peers, order, time span and events (JSON)."""
    events, left = dashboard_events(run, limit)
    return json.dumps({"run": run.folder.name, "order": run.order, "peers": run.peers, "start": run.start,
                       "end": run.end, "events": events, "left_out": left, "problems": run.problems[:5],
                       "traces": len(run.traces), "outputs": len(run.outputs)},
                      separators=(",", ":")).encode()


def make_replay_app(run: Run, host: str = "127.0.0.1", limit: int = MAX_REPLAY_EVENTS) -> Starlette:
    payload = replay_payload(run, limit)

    async def index(request: Request) -> Response:
        if "replay" not in request.query_params:
            return RedirectResponse("/?replay", status_code=302)
        return FileResponse(DASHBOARD / "index.html", headers={"Cache-Control": "no-cache"})

    async def data(request: Request) -> Response:
        return Response(payload, media_type="application/json", headers={"Cache-Control": "no-cache"})

    routes = [Route("/", index), Route("/api/replay", data),
              Mount("/static", StaticFiles(directory=DASHBOARD), name="static")]
    return Starlette(routes=routes, middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts(host))])
