"""A replicated key-value store with a small HTTP face: three processes from one command.

    python examples/kv_store.py               # 3 members on loopback, each with an HTTP face; Ctrl-C stops
    python examples/kv_store.py --check       # the same, then PUTs on each member, GETs from all, stop
    python examples/kv_store.py --data kv-data --check   # durable: ... then all three killed, started again

    curl -X PUT --data 'green' http://127.0.0.1:8100/kv/colour     # member 0 (members 1, 2: 8101, 8102)
    curl http://127.0.0.1:8102/kv/colour                           # -> green, from member 2
    curl http://127.0.0.1:8101/kv                                  # the whole store, as JSON

Each member is one process (``--member I``): a `tom.ReplDict` shared by the group on ports 7100..7102
and an HTTP server (the standard library's) on 8100..8102. A PUT is a replicated call: it returns once
this member has applied it, and every member applies the same calls in the same order. With
``--data DIR`` each member keeps its store in ``DIR/member-I`` (a snapshot and its member's history):
kill all three, start them again, and every key is there. A PUT with an ``Idempotency-Key`` header is
applied once, however often it is sent.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import tom
from tom.errors import TomError

HOST = "127.0.0.1"
GROUP_PORTS = [7100, 7101, 7102]  # --group-port moves them
HTTP_PORTS = [8100, 8101, 8102]  # --http-port moves them
MEMBERS = [f"{HOST}:{p}" for p in GROUP_PORTS]


def serve(index: int, data: str | None = None) -> None:
    """One member: join the group with a replicated dict, answer HTTP until interrupted."""
    folder = f"{data}/member-{index}" if data is not None else None
    with tom.ReplDict(MEMBERS, MEMBERS[index], heartbeat=0.5, timeout=3.0, data=folder) as store:

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/kv":
                    self.reply(200, json.dumps(store.copy(), sort_keys=True))
                elif self.path.startswith("/kv/") and self.path[4:] in store:
                    self.reply(200, str(store[self.path[4:]]))
                else:
                    self.reply(404, "no such key")

            def do_PUT(self) -> None:
                if not self.path.startswith("/kv/") or len(self.path) == 4:
                    return self.reply(400, "PUT /kv/<key> with the value as the body")
                value = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                store.set(self.path[4:], value, tom_id=self.headers.get("Idempotency-Key"))  # once applied here
                self.reply(204, "")

            def reply(self, status: int, body: str) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        store.wait_admitted(30)
        server = ThreadingHTTPServer((HOST, HTTP_PORTS[index]), Handler)
        print(f"member {index}: {MEMBERS[index]}, HTTP on http://{HOST}:{HTTP_PORTS[index]}/kv", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()


def http(method: str, port: int, path: str, body: str | None = None) -> str:
    request = urllib.request.Request(f"http://{HOST}:{port}{path}", method=method,
                                     data=body.encode() if body is not None else None)
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.read().decode()


def wait_serving(procs: list[subprocess.Popen], deadline: float) -> None:
    """Until every member's HTTP face answers; a member that stops first (it said why) ends the wait."""
    for i, port in enumerate(HTTP_PORTS):
        while True:
            try:
                http("GET", port, "/kv")
                break
            except (urllib.error.URLError, ConnectionError):
                if procs[i].poll() is not None:
                    print(f"kv_store: member {i} stopped (exit {procs[i].returncode}) before its HTTP face served",
                          file=sys.stderr)
                    raise SystemExit(2) from None
                if time.monotonic() > deadline:
                    raise SystemExit(f"member on HTTP port {port} did not start") from None
                time.sleep(0.2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--member", type=int, choices=range(3), help="run member I (the launcher runs all three)")
    ap.add_argument("--check", action="store_true", help="PUT on each member, GET from all, print, stop")
    ap.add_argument("--group-port", type=int, default=7100, help="the members' ports: this one and the next two")
    ap.add_argument("--http-port", type=int, default=8100, help="the HTTP faces' ports: this one and the next two")
    ap.add_argument("--data", metavar="DIR", help="durable members: each keeps its store in DIR/member-I; with "
                                                  "--check, all three are then killed and started again")
    args = ap.parse_args()
    GROUP_PORTS[:] = [args.group_port + i for i in range(3)]
    HTTP_PORTS[:] = [args.http_port + i for i in range(3)]
    MEMBERS[:] = [f"{HOST}:{p}" for p in GROUP_PORTS]
    if args.member is not None:
        try:
            serve(args.member, args.data)
        except KeyboardInterrupt:
            pass
        except (TomError, OSError) as e:  # a port in use, a bad data folder: one line, no traceback
            print(f"kv_store: member {args.member}: {e}", file=sys.stderr)
            return 2
        return 0
    ports = ["--group-port", str(args.group_port), "--http-port", str(args.http_port)]
    ports += ["--data", args.data] if args.data is not None else []
    procs = [subprocess.Popen([sys.executable, __file__, "--member", str(i), *ports]) for i in range(3)]
    try:
        wait_serving(procs, time.monotonic() + 60)
        if not args.check:
            print("three members up: PUT and GET http://127.0.0.1:8100..8102/kv/<key>; Ctrl-C stops", flush=True)
            for p in procs:
                p.wait()
            return 0
        for i, port in enumerate(HTTP_PORTS):
            http("PUT", port, f"/kv/key{i}", f"value {i} written at member {i}")
        http("PUT", HTTP_PORTS[2], "/kv/key0", "overwritten at member 2")
        deadline = time.monotonic() + 30
        while True:
            stores = [http("GET", port, "/kv") for port in HTTP_PORTS]
            if len(set(stores)) == 1 and len(json.loads(stores[0])) == 3:
                break
            if time.monotonic() > deadline:
                print("the members disagree:", *stores, sep="\n", flush=True)
                return 1
            time.sleep(0.1)
        for i, store in enumerate(stores):
            print(f"member {i}: {store}", flush=True)
        print("every member holds the same store", flush=True)
        if args.data is None:
            return 0
        for p in procs:
            p.kill()  # SIGKILL, all three at once: nothing is said to the group
        for p in procs:
            p.wait(20)
        procs[:] = [subprocess.Popen([sys.executable, __file__, "--member", str(i), *ports]) for i in range(3)]
        wait_serving(procs, time.monotonic() + 60)
        again = [http("GET", port, "/kv") for port in HTTP_PORTS]
        for i, store in enumerate(again):
            print(f"member {i}, killed and started again: {store}", flush=True)
        if any(store != stores[0] for store in again):
            print("a member lost keys", flush=True)
            return 1
        print("every key is back after all three were killed", flush=True)
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        for p in procs:
            p.send_signal(2)  # SIGINT: each leaves the group
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    sys.exit(main())
