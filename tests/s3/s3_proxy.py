"""A small HTTP proxy on 127.0.0.1 in front of the S3 server: counts the bytes the client fetches,
records each request, and injects faults (an error status, or a cut connection) on chosen requests."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

# rule(method, path, headers) -> None (forward), an int status (answer it without forwarding), "cut"
# (close the connection without forwarding) or "cut_after" (forward, then close before answering)
Rule = Callable[[str, str, dict], "int | str | None"]
_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "trailer", "upgrade"}


class FaultProxy:
    def __init__(self, backend: str, rule: Rule | None = None):
        u = urlsplit(backend)
        self.backend = (u.hostname, u.port)
        self.rule = rule
        self.bytes_out = 0  # response body bytes sent to the client
        self.parquet_bytes = 0  # ... of which from data files (reads of the Delta log not counted)
        self.requests: list[tuple[str, str, dict]] = []
        self.faults = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()

    def _handler(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    out = b""
                    for _ in range(1_000_000):  # bounded
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            self.rfile.readline()
                            return out
                        out += self.rfile.read(size)
                        self.rfile.readline()
                    raise ValueError("too many chunks")
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _any(self):
                body = self._body()
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                with proxy._lock:
                    proxy.requests.append((self.command, self.path, dict(headers)))
                    action = proxy.rule(self.command, self.path, headers) if proxy.rule else None
                    if action is not None:
                        proxy.faults += 1
                if action == "cut":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if isinstance(action, int):
                    msg = b"<Error><Code>InternalError</Code><Message>injected</Message></Error>"
                    self.send_response(action)
                    self.send_header("Content-Length", str(len(msg)))
                    self.end_headers()
                    self.wfile.write(msg)
                    return
                conn = http.client.HTTPConnection(*proxy.backend, timeout=60)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                finally:
                    conn.close()
                if action == "cut_after":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in _HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                length = resp.getheader("Content-Length") if self.command == "HEAD" else str(len(data))
                self.send_header("Content-Length", length or "0")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                    with proxy._lock:
                        proxy.bytes_out += len(data)
                        if self.path.split("?")[0].endswith(".parquet"):
                            proxy.parquet_bytes += len(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        return Handler
