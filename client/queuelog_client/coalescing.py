"""Enqueues from many threads of one ``Client`` sent together: while one request is in flight,
the calls that arrive wait, and go as one ``POST /jobs/batch`` with ``"atomic": false`` once it
is answered; each caller gets its own job, or its own exception, as if it had called alone.

No call waits for company: one that finds nothing in flight is sent at once, alone, as
``POST /jobs``. The thread of the first waiting call sends the next batch, so a caller is never
kept to carry the others' requests after its own answer. It takes the calls that wait as it
sends, not as the request before is answered, so the callers of that request who called again
in between go too (four threads enqueueing in a loop send 2.4 calls a request this way, 2.0 if
the batch were fixed at the answer). Calls whose trace context differs never share a request:
the batch's headers are every item's trace. A body that JSON cannot carry fails its own call
before it joins a batch, and a batch the server refuses whole for its size goes again call by
call.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from queuelog_client.errors import QueuelogError, error_class
from queuelog_client.models import Job
from queuelog_client.transport import Transport

# Calls per batch: far below the server's MAX_BATCH (1,000 by default), which a server may set
# lower; more threads than this waiting at once go in the next request.
MAX_COALESCED = 100
# The problem titles ``POST /jobs`` answers with for the statuses a batch item can have: a
# refused item carries its status, detail and fields, and its caller's exception gets the title
# the same refusal of a lone enqueue would have had.
ITEM_TITLES = {403: "Forbidden", 409: "Conflict with the job's current state", 422: "Invalid input"}
# A batch refused as a whole for its body (413: larger than the server takes, 400: not a body
# it reads), not for its calls: each call is then sent alone, as if it had never coalesced.
BODY_REFUSED = frozenset({400, 413})


def send_one(transport: Transport, body: dict[str, Any], headers: dict[str, str]) -> Job:
    """One enqueue, alone (``POST /jobs``); safe to resend: its body has an idempotency key."""
    response = transport.request("POST", "/jobs", json=body, headers=headers, idempotent=True)
    return Job.from_json(response.json())


def send_each(
    transport: Transport, bodies: list[dict[str, Any]], headers: dict[str, str]
) -> list[Job | QueuelogError]:
    """Many enqueues in one request, each admitted on its own (``POST /jobs/batch`` with
    ``"atomic": false``): per body, its job or the exception a lone enqueue would raise."""
    response = transport.request(
        "POST",
        "/jobs/batch",
        json={"jobs": bodies, "atomic": False},
        headers=headers,
        idempotent=True,
    )
    return [_item(result) for result in response.json()["results"]]


def _item(result: dict[str, Any]) -> Job | QueuelogError:
    status = int(result["status"])
    if status < 300:
        return Job.from_json(result["job"])
    errors = result.get("errors")
    return error_class(status)(
        status,
        ITEM_TITLES.get(status, "error"),
        result.get("detail"),
        {str(k): str(v) for k, v in errors.items()} if isinstance(errors, dict) else None,
    )


@dataclass(eq=False)
class _Call:
    """One ``enqueue`` call: what it sends, and once answered, its job or its exception. Its
    thread waits on ``answered``, which is also set, with ``leads``, to make it send the next
    batch."""

    body: dict[str, Any]
    headers: dict[str, str]
    answered: threading.Event = field(default_factory=threading.Event)
    job: Job | None = None
    error: BaseException | None = None
    leads: bool = False

    def settle(self, outcome: Job | BaseException) -> None:
        if isinstance(outcome, Job):
            self.job = outcome
        else:
            self.error = outcome
        self.answered.set()

    def result(self) -> Job:
        if self.error is not None:
            raise self.error
        assert self.job is not None
        return self.job


class Coalescer:
    """The enqueues of one ``Client``: at most one request in flight, the calls arriving
    meanwhile batched for the next one."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self._lock = threading.Lock()
        self._in_flight = False
        self._waiting: list[_Call] = []

    def enqueue(self, body: dict[str, Any], headers: dict[str, str]) -> Job:
        """Send ``body`` now if nothing is in flight, else with the calls that wait with it."""
        # A body JSON cannot carry (a datetime, NaN) fails here, in its own caller's thread,
        # never in a batch that it would fail for every call in it (as httpx encodes it).
        json.dumps(body, allow_nan=False)
        call = _Call(body, headers)
        with self._lock:
            alone = not self._in_flight
            if alone:
                self._in_flight = True
            else:
                self._waiting.append(call)
        if not alone:
            try:
                call.answered.wait()
            except BaseException:  # a signal's exception: leave no batch waiting for this call
                self._abandon(call)
                raise
            if not call.leads:
                return call.result()
        self._send(self._batch_led_by(call))
        return call.result()

    def _batch_led_by(self, leader: _Call) -> list[_Call]:
        """``leader`` and the calls waiting with its trace headers, oldest first: chosen as the
        request is sent, so the callers of the request just answered, who may have called
        again meanwhile, go in it too."""
        with self._lock:
            same = [call for call in self._waiting if call.headers == leader.headers]
            batch = [leader, *same[: MAX_COALESCED - 1]]
            chosen = set(map(id, batch))
            self._waiting = [call for call in self._waiting if id(call) not in chosen]
        return batch

    def _send(self, calls: list[_Call]) -> None:
        """Send ``calls`` (one request), settle each, then let the next waiting call lead."""
        outcomes: list[Job | BaseException]
        try:
            if len(calls) == 1:
                outcomes = [send_one(self.transport, calls[0].body, calls[0].headers)]
            else:
                outcomes = [*send_each(self.transport, [c.body for c in calls], calls[0].headers)]
        except QueuelogError as exc:  # the whole request was refused, or never answered
            if len(calls) > 1 and exc.status in BODY_REFUSED:
                outcomes = [self._alone(call) for call in calls]
            else:
                outcomes = [_copy(exc) for _ in calls]
        except BaseException as exc:  # a bug or an interrupt: every caller re-raises it
            outcomes = [exc] * len(calls)
        finally:
            self._hand_over()
        for call, outcome in zip(calls, outcomes, strict=True):
            call.settle(outcome)

    def _alone(self, call: _Call) -> Job | BaseException:
        """``call`` sent alone: its job, or what it raised."""
        try:
            return send_one(self.transport, call.body, call.headers)
        except Exception as exc:  # its caller re-raises it
            return exc

    def _hand_over(self) -> None:
        """Wake the oldest waiting call to send the next batch (``_batch_led_by``); or, when
        none waits, mark nothing in flight."""
        with self._lock:
            if not self._waiting:
                self._in_flight = False
                return
            leader = self._waiting.pop(0)
            leader.leads = True  # under the lock, for ``_abandon`` to see
        leader.answered.set()

    def _abandon(self, call: _Call) -> None:
        """Forget a call whose caller stopped waiting: out of the queue; or, when it was chosen
        to send the next batch, the next waiting call sends it (or nothing is in flight)."""
        with self._lock:
            if call in self._waiting:
                self._waiting.remove(call)
                return
            if not call.leads:
                return  # in a batch another caller sends: its answer goes unread
            call.leads = False
        self._hand_over()


def _copy(exc: QueuelogError) -> QueuelogError:
    """The same failure for another caller: an exception object each, for its own traceback."""
    return type(exc)(exc.status, exc.title, exc.detail, exc.errors)
