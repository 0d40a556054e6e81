"""A real HTTP server (stdlib, loopback thread) that serves given Prometheus text at /metrics, so that a
real Prometheus can scrape captured vLLM text whose content the test switches."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class TextServer:
    def __init__(self, text: str):
        self.text = text
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                body = outer.text.encode() if self.path.startswith("/metrics") else b"not found"
                self.send_response(200 if self.path.startswith("/metrics") else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
