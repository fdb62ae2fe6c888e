"""The production server's bridge: granian's event loop reads each request, a thread runs Flask.

Why a bridge and not granian's own WSGI interface: granian's WSGI hands a request to a Python
thread as soon as its headers arrive, and the thread then blocks reading the body. A client
that announces a body and sends it slowly, or never, holds a handler for as long as it likes
(granian has a header read timeout but no body timeout). Here the body is read on the event
loop, which holds thousands of slow connections at no cost, with a deadline; only a request
whose body has fully arrived takes one of the ``threads`` handlers. A body that does not arrive
within ``body_timeout`` seconds is answered 408 and its connection closed, without the app
seeing it. Slow or silent headers are granian's to time out (``http1_header_read_timeout``).

The app's answer is collected in its thread and sent in one piece: queuelog's answers are JSON
documents and pages, never endless streams.
"""

from __future__ import annotations

import asyncio
import functools
import io
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication, WSGIEnvironment

# The environ key of a request's ``ClientWatch``.
CLIENT_WATCH = "queuelog.client_watch"
TIMEOUT_HEADERS = [("content-type", "text/plain; charset=utf-8"), ("connection", "close")]
# How often a worker's event loop proves it still turns (see ``Heartbeat``).
BEAT_SECONDS = 1.0


class RequestScope(Protocol):
    """What the bridge reads of granian's RSGI scope."""

    http_version: str
    server: str
    client: str
    scheme: str
    method: str
    path: str
    query_string: str

    @property
    def headers(self) -> Any: ...


class HTTPProtocol(Protocol):
    """What the bridge uses of granian's RSGI HTTP protocol object."""

    def __aiter__(self) -> Any: ...

    async def __call__(self) -> bytes: ...

    async def client_disconnect(self) -> None: ...

    def response_bytes(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None: ...


class Heartbeat:
    """A file whose modification time a worker's event loop renews every ``BEAT_SECONDS``.

    The server's main process replaces a worker whose file is older than its timeout (see
    ``serve.py``): that worker's loop is stuck, so it answers no one. This is what gunicorn's
    ``timeout`` did for its workers, which granian does not do.
    """

    def __init__(self, directory: Path) -> None:
        self.path = directory / f"{os.getpid()}.beat"
        self._handle: asyncio.TimerHandle | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Beat now and then every ``BEAT_SECONDS`` on ``loop``."""
        self.path.touch()
        self._handle = loop.call_later(BEAT_SECONDS, self.start, loop)

    def stop(self) -> None:
        """A worker that stops on purpose is not stuck: remove its file."""
        if self._handle is not None:
            self._handle.cancel()
        self.path.unlink(missing_ok=True)


Answer = tuple[int, list[tuple[str, str]], bytes]


class ClientWatch:
    """Whether a request's client has closed its connection: watched from when the app asks
    (``start``, from its thread, e.g. a long-poll about to wait) until the app has answered,
    so the requests that do not wait pay nothing for it."""

    __slots__ = ("_gone", "_loop", "_protocol", "_stopped", "_task")

    def __init__(self, loop: asyncio.AbstractEventLoop, protocol: HTTPProtocol) -> None:
        self._loop = loop
        self._protocol = protocol
        self._gone: threading.Event | None = None
        self._task: asyncio.Future[None] | None = None
        self._stopped = False

    def start(self) -> threading.Event:
        """Watch from now on (from the app's thread); the event is set once the client has
        gone."""
        if self._gone is None:
            self._gone = threading.Event()
            self._loop.call_soon_threadsafe(self._watch, self._gone)
        return self._gone

    def _watch(self, gone: threading.Event) -> None:
        if not self._stopped:
            self._task = asyncio.ensure_future(self._protocol.client_disconnect())
            self._task.add_done_callback(functools.partial(_gone_unless_cancelled, gone))

    def stop(self) -> None:
        """On the loop, once the app has answered: watch no longer."""
        self._stopped = True
        if self._task is not None:
            self._task.cancel()


def _gone_unless_cancelled(gone: threading.Event, watched: asyncio.Future[None]) -> None:
    """The watch ended: the client has gone, unless it was called off (or failed)."""
    if not watched.cancelled() and watched.exception() is None:
        gone.set()


class Handlers:
    """Up to ``count`` threads that each run one request at a time and hand the answer back to
    the event loop that asked. Lighter than ``run_in_executor`` (one future, one wake-up of the
    loop per request), which is most of what the bridge costs per request. A thread starts only
    when every started one is busy, so a quiet process keeps its memory small."""

    def __init__(self, count: int, call: Callable[[WSGIEnvironment], Answer]) -> None:
        self.count = count
        self.call = call
        self.requests: queue.SimpleQueue[tuple[asyncio.Future[Answer], WSGIEnvironment] | None]
        self.requests = queue.SimpleQueue()
        self.threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for a request
        self._queued = 0  # requests no thread has taken yet

    def run(self, environ: WSGIEnvironment) -> asyncio.Future[Answer]:
        """The answer of the app to ``environ``, computed in a free handler thread."""
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        with self._lock:
            self._queued += 1
            if self._queued > self._idle and len(self.threads) < self.count:
                thread = threading.Thread(
                    target=self._serve, name=f"queuelog-request-{len(self.threads)}", daemon=True
                )
                thread.start()
                self.threads.append(thread)
        self.requests.put((future, environ))
        return future

    def stop(self) -> None:
        """Let every thread end once the requests already queued are answered."""
        with self._lock:
            self.count = 0  # no new threads
            for _ in self.threads:
                self.requests.put(None)

    def _serve(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            item = self.requests.get()
            with self._lock:
                self._idle -= 1
                self._queued -= item is not None
            if item is None:
                return
            future, environ = item
            try:
                answer = self.call(environ)
            except BaseException as exc:  # handed to the awaiting request, which re-raises it
                future.get_loop().call_soon_threadsafe(_settle, future, None, exc)
            else:
                future.get_loop().call_soon_threadsafe(_settle, future, answer, None)


def _settle(
    future: asyncio.Future[Answer], answer: Answer | None, error: BaseException | None
) -> None:
    """On the loop: give the awaiting request its answer (unless it was cancelled meanwhile)."""
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        assert answer is not None
        future.set_result(answer)


class WSGIBridge:
    """An RSGI application (granian's native interface) that serves a WSGI app from
    ``threads`` threads once each request's body has arrived within ``body_timeout``."""

    def __init__(
        self,
        app: WSGIApplication,
        *,
        threads: int,
        body_timeout: float,
        max_body: int | None,
        heartbeat: Heartbeat | None = None,
    ) -> None:
        self.app = app
        self.body_timeout = body_timeout
        self.max_body = max_body
        self.heartbeat = heartbeat
        self.handlers = Handlers(threads, self._call)

    def __rsgi_init__(self, loop: asyncio.AbstractEventLoop) -> None:
        """Called by granian in each worker once its loop runs."""
        if self.heartbeat is not None:
            self.heartbeat.start(loop)

    def __rsgi_del__(self, loop: asyncio.AbstractEventLoop) -> None:
        """Called by granian in each worker as it stops (requests in flight have answered)."""
        if self.heartbeat is not None:
            self.heartbeat.stop()
        self.handlers.stop()
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            from prometheus_client import multiprocess

            # A worker that exits keeps its counters; only its live gauges are dropped.
            multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]

    async def __rsgi__(self, scope: RequestScope, protocol: HTTPProtocol) -> None:
        """Read the body on the loop (bounded in time and size), then run the app in a thread."""
        try:
            async with asyncio.timeout(self.body_timeout):
                body = await self._body(scope, protocol)
        except TimeoutError:
            protocol.response_bytes(408, TIMEOUT_HEADERS, b"the request body did not arrive\n")
            return
        environ = wsgi_environ(scope, body)
        if body is None:  # unread: the app answers 413 for a length over its limit
            environ["CONTENT_LENGTH"] = str(self.max_body + 1 if self.max_body else 0)
        watch = environ[CLIENT_WATCH] = ClientWatch(asyncio.get_running_loop(), protocol)
        try:
            status, headers, data = await self.handlers.run(environ)
        finally:
            watch.stop()
        protocol.response_bytes(status, headers, data)

    async def _body(self, scope: RequestScope, protocol: HTTPProtocol) -> bytes | None:
        """The whole body, or None when it is over ``max_body`` (read no further)."""
        declared = scope.headers.get("content-length")
        if declared is not None and declared.isdigit():
            if self.max_body is not None and int(declared) > self.max_body:
                return None
            return await protocol() if declared != "0" else b""
        chunks = []  # chunked: count as it comes
        size = 0
        async for chunk in protocol:
            size += len(chunk)
            if self.max_body is not None and size > self.max_body:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    def _call(self, environ: WSGIEnvironment) -> Answer:
        """Run the WSGI app to the end of its answer (in a pool thread)."""
        started: list[Any] = []

        def start_response(
            status: str, headers: list[tuple[str, str]], exc_info: Any = None
        ) -> Callable[[bytes], object]:
            started[:] = [int(status[:3]), headers]
            return _no_write

        answer: Iterable[bytes] = self.app(environ, start_response)
        try:
            data = b"".join(answer)
        finally:
            close = getattr(answer, "close", None)
            if close is not None:
                close()
        return started[0], started[1], data


def _no_write(data: bytes) -> object:
    """WSGI's legacy ``write`` callable: no app of ours uses it."""
    raise NotImplementedError("write() is not supported; return the body instead")


def wsgi_environ(scope: RequestScope, body: bytes | None) -> dict[str, Any]:
    """The PEP 3333 environ of an RSGI request whose body was read (None: too large, unread)."""
    server_host, _, server_port = scope.server.rpartition(":")
    client_host, _, client_port = scope.client.rpartition(":")
    environ: dict[str, Any] = {
        "REQUEST_METHOD": scope.method,
        "SCRIPT_NAME": "",
        "PATH_INFO": scope.path,
        "QUERY_STRING": scope.query_string,
        "SERVER_NAME": server_host.strip("[]"),
        "SERVER_PORT": server_port,
        "SERVER_PROTOCOL": f"HTTP/{scope.http_version}",
        "REMOTE_ADDR": client_host.strip("[]"),
        "REMOTE_PORT": client_port,
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.scheme,
        "wsgi.input": io.BytesIO(body or b""),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        # The body was read whole (and de-chunked), so the input ends where the body does.
        "wsgi.input_terminated": True,
    }
    for name, value in scope.headers.items():
        key = name.upper().replace("-", "_")
        if key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            environ[key] = value
            continue
        key = "HTTP_" + key
        if key in environ:  # a repeated header: one value, as RFC 9110 folds them
            value = f"{environ[key]}{'; ' if key == 'HTTP_COOKIE' else ', '}{value}"
        environ[key] = value
    # The body was read whole and de-chunked here: the app sees its length, never the chunking.
    environ["CONTENT_LENGTH"] = str(len(body or b""))
    environ.pop("HTTP_TRANSFER_ENCODING", None)
    return environ


def silence_of(path: Path) -> float:
    """Seconds since ``path`` (a heartbeat file) was last renewed."""
    return time.time() - path.stat().st_mtime
