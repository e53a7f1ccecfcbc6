"""The HTTP side of a peer (``tom peer --http``): JSON API, Server-Sent Events, Prometheus metrics and
the dashboard page.

Built from libraries made for it, on the peer's own trio loop: Starlette (an ASGI framework that runs
on trio through anyio) for routing, requests and responses; hypercorn's trio worker as the server (it
parses HTTP, we do not); prometheus_client for the exposition format. The dashboard is static files
(`tom/web/dashboard/`), no build step, nothing fetched from elsewhere.

Contract with the peer (`PeerHandle`): the API reads state only through ``status()`` (`tom.web.snapshot`),
sends through ``send()`` (a SendTexts event to the processor, the core's only caller) and watches
through the `EventFeed`. It never touches the core, the links or a task's internals.

Access: the server listens on loopback unless told otherwise. With a token (a closed group), every
``/api/*`` and ``/metrics`` request needs ``Authorization: Bearer <token>``; the page and its static
files hold no data and need none (the page takes the token from its URL's ``#token=`` fragment, which
never reaches a server). Cross-origin calls are allowed from loopback pages only (the group page of
one peer reads the others'), and Host headers other than this server's own names are refused (DNS
rebinding).
"""

from __future__ import annotations

import errno
import json
import logging
import re
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .apitoken import token_matches
from ..build import describe
from ..errors import ConfigError, UsageError
from .eventfeed import LATENCY_BUCKETS, EventFeed, numbered_dicts
from ..core import check_text
from ..codec.frames import Message
from ..errors import KeyConflict
from ..peer.events import Replayed

if TYPE_CHECKING:
    from .gateview import GateControl

log = logging.getLogger("tom.http")

DASHBOARD = Path(__file__).with_name("dashboard")
MAX_BODY_BYTES = 1 << 20  # a POST body larger than this is refused (413) before it is parsed
SEND_TIMEOUT = 5.0  # seconds the processor may take to take a message (it is busy otherwise)
KEEPALIVE = 15.0  # an SSE comment this often, so dead watchers are noticed
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class PeerHandle:
    """What the HTTP side may do with its peer."""

    me: str
    status: Callable[[], dict[str, Any]]  # a fresh snapshot (tom.web.snapshot.snapshot)
    send: Callable[[str, str | None], Awaitable[Message | None | Replayed | UsageError]]  # multicast one text
    # (with its idempotency key, if any)
    busy: Callable[[], bool]  # too much undelivered: refuse new messages for now
    feed: EventFeed
    token: str | None = None  # required bearer token, if any
    gate: GateControl | None = None  # step mode (--step): look at the gate, release its heads


def text_refusal(me: str, text: str) -> tuple[int, str] | None:
    """Why ``text`` cannot be sent as one message — the terminal's limit (`check_text`) — as an HTTP
    status and one line, or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return 400, "the text is not valid Unicode (a lone surrogate)"
    try:
        check_text(me, text)
    except UsageError as e:
        return 413, str(e)
    return None


MAX_KEY = 255
"""The longest Idempotency-Key taken."""


def key_refusal(key: str) -> str | None:
    """Why ``key`` cannot be an Idempotency-Key (1 to `MAX_KEY` visible ASCII characters), or None."""
    if not 0 < len(key) <= MAX_KEY or not all("!" <= c <= "~" for c in key):
        return f"Idempotency-Key: expected 1 to {MAX_KEY} visible ASCII characters (no spaces)"
    return None


def _sse(items: list[tuple[int, tuple]]) -> str:
    """Numbered feed items as Server-Sent Events, one per event."""
    return "".join(f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"
                   for n, item in items for name, data in numbered_dicts(n, item))


def _error(status: int, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers or None)


STEP_OFF = "step mode is off: this peer holds no frames (start it with --step)"


async def _json_body(request: Request) -> Any:
    """The request's body parsed as JSON, or the error Response that refuses it (413 over
    MAX_BODY_BYTES, 400 cut short or not JSON)."""
    too_big = f"request body over {MAX_BODY_BYTES} bytes"
    # the rest of the body stays unread: the connection cannot be reused, say so
    if int(request.headers.get("content-length") or 0) > MAX_BODY_BYTES:
        return _error(413, too_big, Connection="close")
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                return _error(413, too_big, Connection="close")
    except ClientDisconnect:
        return _error(400, "the request ended early")
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        return _error(400, f"the body is not JSON: {e}")


class _Metrics(Collector):
    """Reads the snapshot and the feed's counters at scrape time: nothing is counted twice."""

    def __init__(self, handle: PeerHandle) -> None:
        self.handle = handle

    def collect(self):
        s = self.handle.status()
        feed = self.handle.feed
        c = s["counters"]
        yield CounterMetricFamily("tom_deliveries", "Events (messages and views) delivered by this peer",
                                  value=c["delivered"])
        yield CounterMetricFamily("tom_premature_acks", "ACKs that arrived before their message",
                                  value=c["premature_acks"])
        yield CounterMetricFamily("tom_released_behind_head",
                                  "Messages that were complete but waited behind a late head, then left with it",
                                  value=c["released_behind_head"])
        yield CounterMetricFamily("tom_divergence_alarms", "Times a peer's delivered sequence differed from ours",
                                  value=c["divergence_alarms"])
        build = GaugeMetricFamily("tom_build_info", "1, labelled with the build that runs: compiled (mypyc) or "
                                  "interpreted (and why)", labels=["build"])
        build.add_metric([describe()], 1)
        yield build
        yield GaugeMetricFamily("tom_pending_messages", "Entries in the pending queue", value=s["pending_count"])
        yield GaugeMetricFamily("tom_lamport_clock", "This peer's Lamport clock", value=s["clock"])
        view = s["view"]
        yield GaugeMetricFamily("tom_view_id", "Id of the installed view (0: none yet)",
                                value=view["id"] if view else 0)
        yield GaugeMetricFamily("tom_view_members", "Members of the installed view",
                                value=len(view["members"]) if view else 0)
        frames = CounterMetricFamily("tom_frames", "Frames handled by the processor, by kind and direction",
                                     labels=["kind", "direction"])
        for direction, counts in (("in", feed.frames_in), ("out", feed.frames_out)):
            for cls, n in sorted(counts.items(), key=lambda kv: kv[0].__name__):
                frames.add_metric([cls.__name__.upper(), direction], n)
        yield frames
        buckets, cumulative = [], 0
        for bound, n in zip([*map(str, LATENCY_BUCKETS), "+Inf"], feed.latency_counts):
            cumulative += n
            buckets.append((bound, cumulative))
        yield HistogramMetricFamily("tom_delivery_latency_seconds",
                                    "Origin's send to this peer's delivery (wall clocks), per message",
                                    buckets=buckets, sum_value=feed.latency_sum)
        up = GaugeMetricFamily("tom_neighbor_connected", "1 while the connection to the neighbor is up",
                               labels=["neighbor", "state"])
        heard = GaugeMetricFamily("tom_neighbor_last_heard_age_seconds", "Seconds since the neighbor was heard",
                                  labels=["neighbor"])
        suspected = GaugeMetricFamily("tom_neighbor_suspected", "1 while the neighbor is suspected of failure",
                                      labels=["neighbor"])
        for p in s["peers"]:
            if p["connection"] == "self":
                continue
            up.add_metric([p["pid"], p["connection"]], 1.0 if p["connection"] == "up" else 0.0)
            if p["last_heard_age"] is not None:
                heard.add_metric([p["pid"]], p["last_heard_age"])
            suspected.add_metric([p["pid"]], 1.0 if p["suspected"] else 0.0)
        yield up
        yield heard
        yield suspected
        if s.get("gate") is not None:  # step mode
            yield GaugeMetricFamily("tom_gate_held_frames", "Frames held at the step-mode gate (--step)",
                                    value=s["gate"]["held"])
        yield GaugeMetricFamily("tom_unreachable_pairs",
                                "Pairs (reporter, target) known here where the reporter cannot reach the target",
                                value=len(s.get("unreachable", ())))
        yield GaugeMetricFamily("tom_event_watchers", "Open /api/events streams", value=len(feed.subscribers))
        yield CounterMetricFamily("tom_event_frames_skipped",
                                  "Frames not shown on /api/events?frames=1 (over the per-second budget)",
                                  value=feed.frames_skipped)


def _origin_regex(host: str) -> str:
    """Origins whose pages may call this API: loopback pages, and this server's own host."""
    hosts = [r"localhost", r"127(?:\.\d{1,3}){3}", r"\[::1\]"]
    if host not in ("0.0.0.0", "::", *LOOPBACK_NAMES) and not host.startswith("127."):
        hosts.append(re.escape(f"[{host}]" if ":" in host else host))
    return rf"https?://(?:{'|'.join(hosts)})(?::\d+)?"


def allowed_hosts(host: str) -> list[str]:
    """Host headers accepted: this server's names (any, when it listens on every address)."""
    if host in ("0.0.0.0", "::"):
        return ["*"]
    return sorted({*LOOPBACK_NAMES, "[::1]", f"[{host}]" if ":" in host else host})


def make_app(handle: PeerHandle, host: str = "127.0.0.1") -> Starlette:
    """The ASGI application of one peer."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Metrics(handle))

    def denied(request: Request) -> Response | None:
        if handle.token is None or token_matches(handle.token, request.headers.get("authorization")):
            return None
        # a refused POST's body stays unread: the connection cannot be reused, say so (else the
        # client's next request on it finds it closed)
        close = {} if request.method in ("GET", "HEAD") else {"Connection": "close"}
        return _error(401, "this group is closed: send the API token as 'Authorization: Bearer <token>' "
                           "(it is in the keys folder, file api-token)", **{"WWW-Authenticate": "Bearer"}, **close)

    async def status(request: Request) -> Response:
        return denied(request) or JSONResponse(handle.status())

    async def metrics(request: Request) -> Response:
        if (refused := denied(request)) is not None:
            return refused
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    async def post_message(request: Request) -> Response:
        if (refused := denied(request)) is not None:
            return refused
        data = await _json_body(request)
        if isinstance(data, Response):
            return data
        if not isinstance(data, dict) or not isinstance(data.get("text"), str):
            return _error(400, 'expected a JSON object {"text": "..."}')
        text = data["text"]
        if not text.strip():
            return _error(400, "nothing to send: the text is empty")
        if (refusal := text_refusal(handle.me, text)) is not None:
            return _error(*refusal)
        key = request.headers.get("idempotency-key")
        if key is not None and (why := key_refusal(key)) is not None:
            return _error(400, why)
        if handle.busy():
            return _error(503, "busy: too many messages wait to be delivered here; try again shortly",
                          **{"Retry-After": "1"})
        with trio.move_on_after(SEND_TIMEOUT):
            sent = await handle.send(text, key)
            if isinstance(sent, KeyConflict):
                return _error(422, str(sent))
            if isinstance(sent, UsageError):
                return _error(503, str(sent))
            if isinstance(sent, Replayed):  # accepted before under this key: not again
                return JSONResponse({"clock": sent.clock, "pid": handle.me, "held": sent.clock is None,
                                     "replayed": True}, status_code=202, headers={"Idempotent-Replayed": "true"})
            if sent is None:  # held until a view is installed (joining, or a view change under way)
                return JSONResponse({"clock": None, "pid": handle.me, "held": True}, status_code=202)
            return JSONResponse({"clock": sent.clock, "pid": sent.pid, "held": False}, status_code=202)
        return _error(503, f"the peer did not take the message within {SEND_TIMEOUT:g} s", **{"Retry-After": "1"})

    async def events(request: Request) -> Response:
        if (refused := denied(request)) is not None:
            return refused
        frames = request.query_params.get("frames", "0").lower() in ("1", "true", "yes", "on")
        recent = request.query_params.get("recent", "0").lower() in ("1", "true", "yes", "on")
        # together, with no checkpoint between: the ring holds every item before the subscription
        past = handle.feed.recent(frames) if recent else []
        sub = handle.feed.subscribe(frames)

        async def stream():
            try:
                yield (f"retry: 1000\n: events of {handle.me}{' with frames' if frames else ''}\n\n"
                       f"event: hello\ndata: {json.dumps({'feed': handle.feed.identity})}\n\n")
                if recent:
                    yield (_sse(past) if past else "") + "event: recent\ndata: {}\n\n"
                    past.clear()
                while True:
                    with trio.move_on_after(KEEPALIVE):
                        await sub.wait()
                    if sub.lost:
                        yield "event: lost\ndata: {}\n\n"
                        return
                    items = sub.take()
                    if not items:
                        yield ": keep-alive\n\n"
                        continue
                    yield _sse(items)
            finally:
                handle.feed.unsubscribe(sub)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def gate(request: Request) -> Response:
        if (refused := denied(request)) is not None:
            return refused
        if handle.gate is None:
            return _error(404, STEP_OFF)
        return JSONResponse(handle.gate.view())

    async def release(request: Request) -> Response:
        if (refused := denied(request)) is not None:
            return refused
        control = handle.gate
        if control is None:
            return _error(404, STEP_OFF)
        data = await _json_body(request)
        if isinstance(data, Response):
            return data
        from ..peer.gate import NothingHeld

        try:
            if isinstance(data, dict) and data.get("all") is True and len(data) == 1:
                return JSONResponse(await control.release_all())
            if isinstance(data, dict) and data.get("random") is True and len(data) == 1:
                return JSONResponse(await control.release_random())
            if isinstance(data, dict) and isinstance(data.get("from"), str) and len(data) == 1:
                if data["from"] not in control.neighbors:
                    return _error(400, f"{data['from']} is not a neighbor of {handle.me}")
                return JSONResponse(await control.release(data["from"]))
        except NothingHeld as e:
            return _error(409, str(e))
        return _error(400, 'expected one of {"from": "HOST:PORT"}, {"all": true}, {"random": true}')

    async def hold(request: Request) -> Response:
        if (refused := denied(request)) is not None:
            return refused
        if handle.gate is None:
            return _error(404, STEP_OFF)
        data = await _json_body(request)
        if isinstance(data, Response):
            return data
        if not (isinstance(data, dict) and isinstance(data.get("on"), bool) and len(data) == 1):
            return _error(400, 'expected {"on": true} (hold what comes) or {"on": false} (let everything through)')
        return JSONResponse(await handle.gate.hold(data["on"]))

    async def index(request: Request) -> Response:
        return FileResponse(DASHBOARD / "index.html", headers={"Cache-Control": "no-cache"})

    routes = [
        Route("/", index),
        Route("/api/status", status),
        Route("/api/messages", post_message, methods=["POST"]),
        Route("/api/events", events),
        Route("/api/gate", gate),
        Route("/api/gate/release", release, methods=["POST"]),
        Route("/api/gate/hold", hold, methods=["POST"]),
        Route("/metrics", metrics),
        Mount("/static", StaticFiles(directory=DASHBOARD), name="static"),
    ]
    middleware = [
        Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts(host)),
        Middleware(CORSMiddleware, allow_origin_regex=_origin_regex(host), allow_methods=["GET", "POST"],
                   allow_headers=["Authorization", "Content-Type", "Idempotency-Key"],
                   expose_headers=["Idempotent-Replayed"], max_age=600),
    ]
    return Starlette(routes=routes, middleware=middleware)


def open_http_socket(host: str, port: int) -> socket.socket:
    """Bind and listen on ``host:port`` for the HTTP server; ConfigError with one line if impossible."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise ConfigError(f"--http: port {port} on {host} is already in use") from None
        if e.errno == errno.EADDRNOTAVAIL:
            raise ConfigError(f"--http: {host} is not an address of this machine") from None
        raise ConfigError(f"--http: cannot listen on {host}:{port}: {e.strerror or e}") from None
    return sock


async def serve_http(app: Starlette, sock: socket.socket) -> None:
    """Serve ``app`` on the listening ``sock`` with hypercorn's trio worker until cancelled."""
    from hypercorn.config import Config
    from hypercorn.trio import serve

    config = Config()
    config.bind = [f"fd://{sock.detach()}"]  # hypercorn owns the socket from here on
    config.accesslog = None
    server_log = logging.getLogger("tom.http.server")
    server_log.setLevel(logging.WARNING)  # not its "Running on ..." line: the peer prints its own
    config.errorlog = server_log
    config.graceful_timeout = 1.0
    await serve(app, config, shutdown_trigger=trio.sleep_forever)


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host

