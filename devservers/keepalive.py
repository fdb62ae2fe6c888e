"""One kept-alive HTTP/1.1 connection (http.client) for the tests' and benchmarks' clients:
servers close idle connections, so a closed one is replaced, and a request sent again only where
that cannot do anything twice."""

from __future__ import annotations

import http.client
import select
from collections.abc import Mapping

# Methods that may be applied twice (RFC 9110, 9.2.2).
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
# What http.client raises when the server closed the connection without answering. On a
# kept-alive connection it may have closed it, idle, as the request went out, or have read the
# request and died: the client cannot tell which, so only an idempotent request goes again.
CLOSED = (
    http.client.RemoteDisconnected,
    ConnectionResetError,
    ConnectionAbortedError,
    BrokenPipeError,
)


class KeepAlive:
    """One connection to ``host``:``port``, opened when needed and kept between requests."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self._conn = http.client.HTTPConnection(host, port, timeout=timeout)

    def exchange(
        self, method: str, path: str, body: bytes | None, headers: Mapping[str, str]
    ) -> tuple[http.client.HTTPResponse, bytes]:
        """Send one request; its response and body.

        A kept connection the server has closed meanwhile is replaced before anything is sent
        on it, so any request may go; an idempotent request whose kept connection the server
        closed as it went out goes once more, on a new connection."""
        if self.closed_by_server():
            self._conn.close()
        kept = self._conn.sock is not None
        try:
            return self._send(method, path, body, headers)
        except CLOSED:
            if not (kept and method in IDEMPOTENT):
                raise
        return self._send(method, path, body, headers)

    def _send(
        self, method: str, path: str, body: bytes | None, headers: Mapping[str, str]
    ) -> tuple[http.client.HTTPResponse, bytes]:
        try:
            self._conn.request(method, path, body=body, headers=dict(headers))
            response = self._conn.getresponse()
            return response, response.read()
        except (OSError, http.client.HTTPException):
            self._conn.close()  # the next request opens a new one
            raise

    def closed_by_server(self, wait: float = 0.0) -> bool:
        """Whether the kept connection has something to read while idle, waiting up to ``wait``
        seconds for it: the server closed it (or wrote out of turn, a timeout's 408 say), so it
        cannot carry another request."""
        if self._conn.sock is None:
            return False
        readable, _, _ = select.select([self._conn.sock], [], [], wait)
        return bool(readable)

    def close(self) -> None:
        """Close the connection (the next request opens a new one)."""
        self._conn.close()
