"""A misbehaving HTTP peer on 127.0.0.1 (stdlib thread): each path answers what the test sets -
a status, a body, a content type, optionally dripped one byte every ``drip_s`` seconds (all paths,
or only the paths in ``drip_paths``). It stands in for an engine or a Prometheus that lies, drips or
sends absurd data; everything specops does with the answer (HTTP client, parser, verdicts) is real.
``hit`` is set once a request arrived (``hits`` counts them by path), so a test can act while
specops is stuck in the middle of an exchange."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class HostileServer:
    def __init__(self, routes: dict[str, tuple[int, str]] | None = None, *, drip_s: float | None = None,
                 content_type: str = "text/plain; version=0.0.4", drip_paths: set[str] | None = None):
        self.routes = dict(routes or {})
        self.drip_s, self.content_type, self.drip_paths = drip_s, content_type, drip_paths
        self.stop, self.hit = threading.Event(), threading.Event()
        self.hits: dict[str, int] = {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                path = self.path.split("?")[0]
                outer.hits[path] = outer.hits.get(path, 0) + 1
                outer.hit.set()
                status, body = outer.routes.get(path, (404, "not found"))
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", outer.content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if outer.drip_s is None or (outer.drip_paths is not None and path not in outer.drip_paths):
                    self.wfile.write(data)
                    return
                for i in range(len(data)):  # bounded: stops when the test closes the server
                    if outer.stop.wait(outer.drip_s):
                        return
                    try:
                        self.wfile.write(data[i:i + 1])
                        self.wfile.flush()
                    except OSError:
                        return

            do_POST = do_GET  # noqa: N815

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.stop.set()
        time.sleep(0.05)
        self.httpd.shutdown()
        self.httpd.server_close()

