"""The viewer's web server: the static page and the JSON answers to its queries.

Input: a :class:`~cstrace.viewer.store.TraceStore`; output: an HTTP server
(:func:`make_server`) bound to 127.0.0.1 unless told otherwise, serving
``/`` (the page, shipped in this package's ``static/`` folder: nothing is
loaded from anywhere else) and ``/api/<query>`` (JSON).

The standard library's :class:`~http.server.ThreadingHTTPServer` is enough:
one local user, a handful of small GET requests a second, no sessions, no
templates; a web framework would add a dependency and nothing the page needs.
Each request runs in its own thread; the store's queries are thread safe.

Queries (every number in decimal, addresses in hexadecimal):

- ``/api/overview``: inputs, sources, configuration, loss report, top functions;
- ``/api/rows?start=R&count=N``: a window of the instruction list;
- ``/api/search?q=TEXT&from=R&dir=1|-1``: the next (previous) matching row;
- ``/api/next?addr=A&from=R&dir=1|-1``: the next (previous) execution of an address;
- ``/api/source?addr=A&ctx=C``: the source around the address's line, with counts;
- ``/api/function?addr=A&run=K&ctx=C``: the function's disassembly, with counts
  (``ctx``: the context ID the address ran in, for traces of several processes);
- ``/api/data?row=R``: data and messages near a row, and the last values written;
- ``/api/timeline?lo=X&hi=X&width=PX``: slices of each source between two points of the
  timeline's axis (trace time, or rows when the trace has no timestamps);
- ``/api/position?row=R``: where a row is on that axis.
"""

from __future__ import annotations

import json
import mimetypes
import sys
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cstrace.viewer.store import TraceStore

__all__ = ["ViewerServer", "make_server"]

_STATIC = ("index.html", "viewer.js", "viewer.css")
"""The files of the page (package data)."""


class QueryError(ValueError):
    """A query the page should not have sent: a parameter missing or not a number."""


class _Query:
    """The parameters of one request, read as the query needs them."""

    def __init__(self, query: str) -> None:
        self._params = {k: v[-1] for k, v in parse_qs(query).items()}

    def text(self, name: str, default: str | None = None) -> str:
        value = self._params.get(name, default)
        if value is None:
            raise QueryError(f"missing parameter {name!r}")
        return value

    def num(self, name: str, default: int | None = None, base: int = 10) -> int:
        value = self._params.get(name)
        if value is None:
            if default is None:
                raise QueryError(f"missing parameter {name!r}")
            return default
        try:
            return int(value, base)
        except ValueError:
            raise QueryError(f"parameter {name!r} is not a number: {value!r}") from None

    def real(self, name: str) -> float | None:
        value = self._params.get(name)
        if value is None:
            return None
        try:
            return float(value)
        except ValueError:
            raise QueryError(f"parameter {name!r} is not a number: {value!r}") from None

    def context(self) -> int | None:
        value = self.num("ctx", -1)
        return None if value < 0 else value

    def forward(self) -> bool:
        return self.num("dir", 1) >= 0


def _routes(store: TraceStore) -> dict[str, Callable[[_Query], Any]]:
    return {
        "overview": lambda q: store.overview(),
        "rows": lambda q: store.rows(q.num("start", 0), q.num("count", 100)),
        "search": lambda q: store.search(q.text("q"), q.num("from", 0), q.forward()),
        "next": lambda q: store.next_execution(
            q.num("addr", base=16), q.num("from", 0), q.forward()
        ),
        "source": lambda q: store.source(q.num("addr", base=16), q.context()),
        "function": lambda q: store.function(q.num("addr", base=16), q.num("run", 0), q.context()),
        "data": lambda q: store.data(q.num("row", 0)),
        "timeline": lambda q: store.timeline(q.real("lo"), q.real("hi"), q.num("width", 1000)),
        "position": lambda q: store.position(q.num("row", 0)),
    }


class ViewerServer(ThreadingHTTPServer):
    """The HTTP server of one store."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], store: TraceStore | None = None) -> None:
        self.store = store
        self.routes = _routes(store) if store is not None else {}
        super().__init__(address, _Handler)

    def attach(self, store: TraceStore) -> None:
        """Serve ``store`` (a server bound before its trace was decoded)."""
        self.store = store
        self.routes = _routes(store)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A browser that went away before its answer is not an error; anything else is
        a bug, reported as the standard library does."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    @property
    def url(self) -> str:
        """The page's address."""
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/"


class _Handler(BaseHTTPRequestHandler):
    server: ViewerServer

    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not logged (the library never prints)."""

    def do_GET(self) -> None:
        """Answer one GET: a static file or a query."""
        parts = urlsplit(self.path)
        path = parts.path
        if path.startswith("/api/"):
            self._api(path[5:], parts.query)
            return
        name = "index.html" if path in ("/", "/index.html") else path.lstrip("/")
        if name not in _STATIC:
            self._send(HTTPStatus.NOT_FOUND, b"not found", "text/plain")
            return
        body = resources.files("cstrace.viewer").joinpath("static", name).read_bytes()
        ctype = mimetypes.guess_type(name)[0] or "application/octet-stream"
        self._send(HTTPStatus.OK, body, ctype)

    def _api(self, name: str, query: str) -> None:
        route = self.server.routes.get(name)
        if route is None:
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no query {name!r}"})
            return
        try:
            answer = route(_Query(query))
        except QueryError as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            return
        self._json(HTTPStatus.OK, answer)

    def _json(self, status: HTTPStatus, value: Any) -> None:
        body = json.dumps(value, separators=(",", ":")).encode()
        self._send(status, body, "application/json")

    def _send(self, status: HTTPStatus, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        # The page runs only what it ships: no script, style or font from elsewhere.
        self.send_header(
            "Content-Security-Policy",
            "default-src 'self'; img-src 'self' data:; connect-src 'self'",
        )
        self.end_headers()
        self.wfile.write(body)


def make_server(store: TraceStore | None, host: str = "127.0.0.1", port: int = 0) -> ViewerServer:
    """A server for ``store`` on ``host:port`` (port 0: any free port), bound but not yet
    serving: call ``serve_forever()``. With ``store`` None, the port is taken now and the
    store given later (:meth:`ViewerServer.attach`), so that a busy port is known before a
    long decode. ``OSError`` when the address cannot be bound."""
    return ViewerServer((host, port), store)
