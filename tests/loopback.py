"""Loopback helpers for the sink and watcher tests: an HTTP receiver that records each POST (with
the time it arrived) and answers from a script, and a free port."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    """An HTTP server on 127.0.0.1 that records POSTs and answers from a script."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        #: Answers in order: (status, body), ("sleep", seconds) or ("echo-auth", None); then 200.
        self.script: list[tuple[Any, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.requests.append({"path": self.path, "headers": dict(self.headers),
                                          "body": json.loads(body), "at": time.time()})
                status, answer = receiver.script.pop(0) if receiver.script else (200, b"ok")
                if status == "sleep":
                    time.sleep(float(answer))
                    status, answer = 200, b"late"
                if status == "echo-auth":  # a careless server that echoes credentials
                    status, answer = 401, f"bad token {self.headers['Authorization']}".encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up first (a "sleep" answer past its timeout)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)

    def bodies(self) -> list[Any]:
        return [r["body"] for r in self.requests]


@contextlib.contextmanager
def running_receiver() -> Iterator[Receiver]:
    """A receiver serving on a thread until the block ends."""
    r = Receiver()
    r.thread.start()
    try:
        yield r
    finally:
        r.server.shutdown()
        r.server.server_close()


def free_port() -> int:
    """A free loopback TCP port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
