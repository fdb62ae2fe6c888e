"""What a handler sees and says: its ``JobContext``, ``Retry`` and ``Fail``, and the outcome
item (``POST /jobs/finish``) that running it produces."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from queuelog_client.bodies import enqueue_item
from queuelog_client.models import Job

MAX_ERROR_CHARS = 4000  # the server keeps 4 KiB of an error; no point sending megabytes
MAX_RETRY_AFTER = 366 * 86_400  # the server's longest retry_in
MAX_LOG_LINE_BYTES = 2048  # the server's limit per line (UTF-8): longer lines are cut to it
MAX_LOG_BATCH = 100  # lines per request, the server's limit
# Lines kept while the server cannot be reached; past it the oldest go (the server keeps 256 KiB
# per attempt anyway).
MAX_BUFFERED_LINES = 2000


class Retry(Exception):
    """Fail this attempt and run the job again after ``after`` seconds (the server's backoff
    when None), if retries are left."""

    def __init__(self, after: float | None = None, message: str = "retry requested") -> None:
        if after is not None and not 0 <= after <= MAX_RETRY_AFTER:
            raise ValueError(f"Retry(after=...) takes 0 to {MAX_RETRY_AFTER} seconds")
        super().__init__(message)
        self.after = after
        self.message = message or "retry requested"


class Fail(Exception):
    """Fail the job now, without further retries."""

    def __init__(self, message: str = "failed by the handler") -> None:
        super().__init__(message)
        self.message = message or "failed by the handler"


Spawner = Callable[[list[dict[str, Any]]], list[Job]]


class JobContext:
    """The job a handler runs: ``id``, ``type``, ``payload``, ``attempt``, ``secrets`` (the
    job's secret values by name, from the claim), ``parents`` (what the jobs it depends on
    returned: ``[{"id", "type", "status", "result"}]``, in ``depends_on`` order), ``job``, plus
    ``progress()``, ``log()``, ``spawn()`` and ``cancelled``, which turns true within a few
    seconds of the server saying the job was cancelled (or is otherwise no longer this
    worker's): stop early when it does."""

    def __init__(self, job: Job, spawner: Spawner | None = None) -> None:
        self.job = job
        self._spawner = spawner
        self.id = job.id
        self.type = job.type
        self.payload = job.payload
        self.attempt = job.attempt
        self.secrets = job.secrets or {}
        self.parents = job.parents or []
        self.cancelled = False
        self._lock = threading.Lock()
        self._progress: tuple[int, str | None] | None = None
        self._lines: deque[str] = deque(maxlen=MAX_BUFFERED_LINES)
        self.sending_logs = threading.Lock()  # one sender at a time keeps the lines in order

    def progress(self, percent: int, message: str | None = None) -> None:
        """Report progress (0-100, optional message); sent with the next heartbeat batch,
        within about a second. Only the latest report is sent."""
        if isinstance(percent, bool) or not isinstance(percent, int) or not 0 <= percent <= 100:
            raise ValueError("percent must be an integer from 0 to 100")
        with self._lock:
            self._progress = (percent, message)

    def log(self, text: str) -> None:
        """Append ``text`` to this attempt's log, one line per line of it (admins read it on
        the job page). Never waits for the network: the lines ride on the job's next heartbeat
        (within about a second) or on its outcome. Lines are cut at 2 KiB."""
        lines = str(text).splitlines() or [""]
        with self._lock:
            self._lines.extend(_cut(line) for line in lines)

    def take_logs(self, limit: int = MAX_LOG_BATCH) -> list[str]:
        """Up to ``limit`` of the oldest unsent lines (for the sender)."""
        with self._lock:
            return [self._lines.popleft() for _ in range(min(limit, len(self._lines)))]

    def unsent_logs(self) -> int:
        """How many lines wait to be sent."""
        with self._lock:
            return len(self._lines)

    def restore_logs(self, lines: list[str]) -> None:
        """Put back lines whose request failed, before any logged since."""
        with self._lock:
            self._lines.extendleft(reversed(lines))

    def spawn(self, type: str, payload: dict[str, Any] | None = None, **options: Any) -> Job:
        """Enqueue a child of this job now (options as for ``Client.enqueue``): it belongs to
        the job's producer and carries ``parent_id``. Refused once the job is no longer this
        worker's (``Conflict``)."""
        if self._spawner is None:
            raise RuntimeError("this context was made without a client: it cannot spawn")
        (child,) = self._spawner([enqueue_item(type, payload, options)])
        return child

    def take_progress(self) -> tuple[int, str | None] | None:
        """The progress reported since the last call, if any (for the heartbeat sender)."""
        with self._lock:
            progress, self._progress = self._progress, None
        return progress

    def restore_progress(self, progress: tuple[int, str | None]) -> None:
        """Put back progress whose heartbeat failed, unless a newer report replaced it."""
        with self._lock:
            if self._progress is None:
                self._progress = progress


Handler = Callable[[JobContext], "dict[str, Any] | None"]


def run_handler(handler: Handler, ctx: JobContext) -> dict[str, Any]:
    """Run ``handler`` on ``ctx`` and describe the outcome as a ``POST /jobs/finish`` item."""
    item: dict[str, Any] = {"id": ctx.id, "attempt": ctx.attempt}
    try:
        result = handler(ctx)
        if result is not None and not isinstance(result, dict):
            raise TypeError(f"a handler returns a dict or None, not {type(result).__name__}")
        if result is not None:
            json.dumps(result, allow_nan=False)  # fail the attempt here, not in the sender
    except Retry as exc:
        item |= {"outcome": "failed", "error": exc.message}
        if exc.after is not None:
            item["retry_in"] = exc.after
        return item
    except Fail as exc:
        return item | {"outcome": "failed", "error": exc.message, "retryable": False}
    except Exception as exc:
        return item | {"outcome": "failed", "error": describe(exc)}
    if result is not None:
        item["result"] = result
    return item | {"outcome": "completed"}


def _cut(line: str) -> str:
    """``line`` within the server's limit per line, cut on a character boundary."""
    encoded = line.encode("utf-8", "surrogatepass")
    if len(encoded) <= MAX_LOG_LINE_BYTES:
        return line
    return encoded[:MAX_LOG_LINE_BYTES].decode("utf-8", "ignore")


def describe(exc: BaseException) -> str:
    """``"ExceptionType: message"`` (just the type when the message is empty), bounded."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text[:MAX_ERROR_CHARS]
