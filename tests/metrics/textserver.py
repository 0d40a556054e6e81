"""A real HTTP server (stdlib, loopback thread) that serves given Prometheus text at /metrics (and 200 at
/health, as vLLM does), so that a
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
                if self.path.startswith("/health"):  # vLLM answers 200 with an empty body when ready
                    body, code = b"", 200
                else:
                    metrics = self.path.startswith("/metrics")
                    body, code = (outer.text.encode(), 200) if metrics else (b"not found", 404)
                self.send_response(code)
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
