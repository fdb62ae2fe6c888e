"""One keep-alive HTTP connection pool to the server: timeouts, typed errors, safe retries."""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from queuelog_client.errors import Unreachable, from_response

# "Not done, ask again later": the server answered without doing anything (rate limit, busy
# database), so even a request that is not idempotent may be sent again.
NOT_DONE = frozenset({429, 503})
# The request never reached the server, so resending it cannot do anything twice.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# The server closed the connection without answering: on a kept-alive connection it may have
# closed it, idle, as the request went out (httpx replaces one it sees closed before sending), or
# it may have read the request and died; the client cannot tell which, so only a request that
# may be applied twice is sent again for it.
CLOSED = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)


def backoff(retry: int, *, base: float, cap: float) -> float:
    """Exponential backoff with full jitter: uniform(0, min(cap, base * 2**retry))."""
    return random.uniform(0, min(cap, base * 2**retry))


def retry_after(response: httpx.Response, cap: float) -> float | None:
    """The server's ``Retry-After`` in seconds (delta or HTTP date), at most ``cap``."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return min(max(seconds, 0.0), cap)


class Transport:
    """Sends requests with a Bearer token over one ``httpx.Client`` (keep-alive).

    ``idempotent`` requests (GETs, writes fenced by an idempotency key or an attempt) are retried
    on any network error, 429 and 5xx; others only when they cannot have been applied: the
    connection was never made, or the server answered 429/503. An idempotent request whose
    connection the server closed without answering goes once more at once, outside the retries:
    a kept-alive connection closed as the request went out is no failure of the server."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float,
        retries: int,
        backoff_base: float = 0.2,
        backoff_cap: float = 10.0,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.timeout = timeout
        self.retries = retries
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.sleep = sleep
        self._http = httpx.Client(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}", "User-Agent": "queuelog-client/0.1"},
            timeout=timeout,
        )

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        idempotent: bool,
        timeout: float | None = None,
        retries: int | None = None,
    ) -> httpx.Response:
        """Send one request, retrying what is safe to retry; an error status raises its typed
        ``QueuelogError``, a network failure after the last retry raises ``Unreachable``."""
        budget = self.retries if retries is None else retries
        send = functools.partial(
            self._http.request,
            method,
            path,
            json=json,
            params=params,
            headers=headers,
            timeout=timeout or self.timeout,
        )
        for retry in range(budget + 1):
            last = retry == budget
            try:
                response = _send(send, resend=idempotent and retry == 0)
            except httpx.TransportError as exc:
                if last or not (idempotent or isinstance(exc, NOT_SENT)):
                    raise Unreachable(None, "server unreachable", _describe(exc)) from exc
                self.sleep(self._delay(retry))
                continue
            status = response.status_code
            if status < 400:
                return response
            if last or not (status in NOT_DONE or (idempotent and status >= 500)):
                raise from_response(response)
            self.sleep(retry_after(response, self.backoff_cap * 6) or self._delay(retry))
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    def _delay(self, retry: int) -> float:
        return backoff(retry, base=self.backoff_base, cap=self.backoff_cap)

    def close(self) -> None:
        """Close the pooled connections."""
        self._http.close()


def _send(send: Callable[[], httpx.Response], *, resend: bool) -> httpx.Response:
    """``send()``, and once more at once when ``resend`` and the server closed the connection
    without answering (httpx drops that connection: the second goes on a new one)."""
    try:
        return send()
    except CLOSED:
        if not resend:
            raise
    return send()


def _describe(exc: httpx.TransportError) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
