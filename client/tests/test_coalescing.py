"""Enqueues from threads sharing one ``Client`` against a real server: fewer requests than
calls, each caller its own job or its own exception, a lone call sent alone as ``POST /jobs``.
Requests are counted by the server itself (``/metrics``); a scripted server holds a request
open for as long as the interrupted caller's test needs."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from conftest import Server, start_server, wait_until
from queuelog_client import Client, Forbidden, Job, Unprocessable
from queuelog_client.coalescing import Coalescer
from test_transport import JOB, Answer, Scripted

from devservers.sockets import serving

pytestmark = pytest.mark.slow

THREADS = 8
CALLS = 25  # per thread


def enqueue_requests(server: Server) -> tuple[int, int]:
    """How many ``POST /jobs`` and ``POST /jobs/batch`` the server answered so far (no test
    here lists jobs, so every ``/jobs`` request is an enqueue)."""
    counts = server.requests()
    return counts["/jobs"], counts["/jobs/batch"]


def in_threads(call: Callable[[int, int], Job]) -> dict[tuple[int, int], Job | Exception]:
    """``call(thread, n)`` for ``CALLS`` values of n in each of ``THREADS`` threads started
    together: what each call returned or raised."""
    outcomes: dict[tuple[int, int], Job | Exception] = {}
    start = threading.Barrier(THREADS)

    def run(thread: int) -> None:
        start.wait()
        for n in range(CALLS):
            try:
                outcomes[thread, n] = call(thread, n)
            except Exception as exc:  # kept for the test to look at
                outcomes[thread, n] = exc

    threads = [threading.Thread(target=run, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(outcomes) == THREADS * CALLS, "every call returned"
    return outcomes


def sent_by(server: Server, work: Callable[[], Any]) -> tuple[int, int]:
    """The ``POST /jobs`` and ``POST /jobs/batch`` requests ``work()`` cost the server."""
    singles, batches = enqueue_requests(server)
    work()
    after_singles, after_batches = enqueue_requests(server)
    return after_singles - singles, after_batches - batches


def test_threads_sharing_a_client_send_fewer_requests_than_calls(server: Server) -> None:
    outcomes: dict[tuple[int, int], Job | Exception] = {}
    with server.client("producer") as producer:

        def enqueue(thread: int, n: int) -> Job:
            return producer.enqueue("email.send", {"thread": thread, "n": n})

        singles, batches = sent_by(server, lambda: outcomes.update(in_threads(enqueue)))
    print(f"{THREADS * CALLS} enqueues: {singles} POST /jobs, {batches} POST /jobs/batch")
    for (thread, n), job in outcomes.items():
        assert isinstance(job, Job) and job.payload == {"thread": thread, "n": n}
    assert len({job.id for job in outcomes.values() if isinstance(job, Job)}) == THREADS * CALLS
    assert batches > 0 and singles + batches < THREADS * CALLS


def test_each_caller_gets_its_own_job_or_its_own_exception(server: Server) -> None:
    """A producer capped at medium: every third call asks for critical (403), every fifth
    sends a type the server does not know (422); the others get their jobs, in the same
    batches as the refused calls."""
    outcomes: dict[tuple[int, int], Job | Exception] = {}
    with server.client("capped") as capped:

        def enqueue(thread: int, n: int) -> Job:
            if n % 3 == 0:
                return capped.enqueue("email.send", {"n": n}, priority="critical")
            job_type = "no.such.type" if n % 5 == 0 else "email.send"
            return capped.enqueue(job_type, {"thread": thread, "n": n})

        _, batches = sent_by(server, lambda: outcomes.update(in_threads(enqueue)))
    assert batches > 0, "the calls were coalesced"
    for (thread, n), outcome in outcomes.items():
        if n % 3 == 0:
            assert isinstance(outcome, Forbidden) and outcome.status == 403
            assert outcome.title == "Forbidden" and "priority" in (outcome.detail or "")
        elif n % 5 == 0:
            assert isinstance(outcome, Unprocessable) and outcome.status == 422
            assert outcome.errors is not None and "type" in outcome.errors
        else:
            assert isinstance(outcome, Job) and outcome.payload == {"thread": thread, "n": n}
    refusals = [outcome for outcome in outcomes.values() if isinstance(outcome, Exception)]
    assert len({id(exc) for exc in refusals}) == len(refusals), "an exception object each"


def test_a_lone_call_goes_at_once_as_post_jobs(server: Server) -> None:
    jobs: list[Job] = []
    with server.client("producer") as producer:
        singles, batches = sent_by(server, lambda: jobs.append(producer.enqueue("email.send")))
    assert (singles, batches) == (1, 0)
    assert jobs[0].status == "pending"


def test_coalesce_false_sends_one_request_per_call(server: Server) -> None:
    with Client(server.url, server.database.tokens["producer"], coalesce=False) as producer:

        def enqueue(thread: int, n: int) -> Job:
            return producer.enqueue("email.send", {"thread": thread, "n": n})

        singles, batches = sent_by(server, lambda: in_threads(enqueue))
    assert (singles, batches) == (THREADS * CALLS, 0)


class Interrupted(Exception):
    """What the test's signal handler raises in the main thread."""


def interrupt(signum: int, frame: FrameType | None) -> None:
    raise Interrupted


def test_a_caller_interrupted_while_waiting_holds_up_no_later_call() -> None:
    """The main thread's call waits behind another thread's slow request when a signal handler
    raises in it: once that request is answered, a later call is still sent (the interrupted
    call is not left to lead a batch nobody sends)."""
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        with serving(Scripted([])) as scripted, Client(scripted.url, "t", retries=0) as client:
            scripted.script += [Answer(201, JOB, delay=1.5), Answer(201, {**JOB, "id": 8})]
            first = threading.Thread(target=client.enqueue, args=("email.send",), daemon=True)
            first.start()
            wait_until(lambda: len(scripted.received) == 1, 10, "the first call in flight")
            signal.setitimer(signal.ITIMER_REAL, 0.3)  # while the main thread's call waits
            with pytest.raises(Interrupted):
                client.enqueue("email.send")
            first.join(10)
            later: list[Job] = []
            after = threading.Thread(
                target=lambda: later.append(client.enqueue("email.send")), daemon=True
            )
            after.start()
            after.join(10)
            assert not after.is_alive() and later[0].id == 8
            assert [path for _, path, _ in scripted.received] == ["/jobs", "/jobs"]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _behind_a_slow_call(scripted: Scripted, client: Client, calls: list[Any]) -> list[Any]:
    """Hold a first call in flight (the script's first answer is slow), make ``calls`` (each
    ``(type, payload)``) from threads meanwhile, so that they coalesce; what each returned or
    raised, in order."""
    first = threading.Thread(target=client.enqueue, args=("email.send",), daemon=True)
    first.start()
    wait_until(lambda: len(scripted.received) == 1, 10, "the first call in flight")
    outcomes: list[Any] = [None] * len(calls)

    def call(index: int) -> None:
        try:
            outcomes[index] = client.enqueue(*calls[index])
        except Exception as exc:  # kept for the test to look at
            outcomes[index] = exc

    threads = [threading.Thread(target=call, args=(i,), daemon=True) for i in range(len(calls))]
    for thread in threads:
        thread.start()
        time.sleep(0.05)  # in this order
    for thread in [first, *threads]:
        thread.join(10)
    return outcomes


def test_a_call_that_cannot_be_sent_fails_alone_not_its_batch() -> None:
    """A payload JSON cannot carry (a datetime, NaN) is its caller's mistake: the other calls
    waiting with it are sent, and get their jobs."""
    with serving(Scripted([])) as scripted, Client(scripted.url, "t", retries=0) as client:
        batch = {"results": [{"status": 201, "job": {**JOB, "id": n}} for n in (8, 9)]}
        scripted.script += [Answer(201, JOB, delay=1.0), Answer(200, batch)]
        outcomes = _behind_a_slow_call(
            scripted,
            client,
            [
                ("email.send", {"n": 1}),
                ("email.send", {"at": datetime.now(UTC)}),
                ("email.send", {"x": float("nan")}),
                ("email.send", {"n": 2}),
            ],
        )
        assert isinstance(outcomes[1], TypeError) and isinstance(outcomes[2], ValueError)
        assert [o.id for o in (outcomes[0], outcomes[3])] == [8, 9]
        sent = [(path, body) for _, path, body in scripted.received]
        assert sent[1][0] == "/jobs/batch"
        assert [item["payload"] for item in sent[1][1]["jobs"]] == [{"n": 1}, {"n": 2}]


@pytest.mark.parametrize("status", [413, 400])
def test_a_batch_refused_as_a_whole_sends_each_call_alone(status: int) -> None:
    """The calls that coalesced make a body the server refuses whole (413: larger than its
    MAX_CONTENT_LENGTH, though each call alone fits): each is sent alone, and answered as if
    it had called alone."""
    with serving(Scripted([])) as scripted, Client(scripted.url, "t", retries=0) as client:
        refused = Answer(status, {"title": "refused", "status": status, "detail": "too large"})
        alone = [Answer(201, {**JOB, "id": 8}), Answer(422, {"title": "Invalid input"})]
        scripted.script += [Answer(201, JOB, delay=1.0), refused, *alone]
        calls = [("email.send", {"n": 1}), ("no.such.type", {"n": 2})]
        outcomes = _behind_a_slow_call(scripted, client, calls)
        assert outcomes[0].id == 8
        assert isinstance(outcomes[1], Unprocessable) and outcomes[1].status == 422
        paths = [path for _, path, _ in scripted.received]
        assert paths == ["/jobs", "/jobs/batch", "/jobs", "/jobs"]


@pytest.fixture
def small_bodies(tmp_path: Path) -> Iterator[Server]:
    """A server that takes request bodies of at most 48,000 bytes."""
    yield from start_server(tmp_path, MAX_CONTENT_LENGTH=48_000)


def test_calls_that_coalesce_beyond_the_servers_body_limit_each_get_their_job(
    small_bodies: Server,
) -> None:
    """Each call's body (15 kB) fits the server's limit; three or more of them in one batch
    do not. Every caller still gets its job."""
    outcomes: dict[tuple[int, int], Job | Exception] = {}
    with small_bodies.client("producer") as producer:

        def enqueue(thread: int, n: int) -> Job:
            return producer.enqueue("email.send", {"pad": "x" * 15_000, "n": n})

        _, batches = sent_by(small_bodies, lambda: outcomes.update(in_threads(enqueue)))
    assert batches > 0, "the calls were coalesced"
    refused = [o for o in outcomes.values() if not isinstance(o, Job)]
    assert refused == []


def test_a_call_made_while_the_next_sender_wakes_goes_in_its_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The next batch is taken as it is sent, not as the request before is answered: a call
    that arrives in between (here held open by pausing the woken sender until the call waits)
    goes in that batch instead of waiting for one more request."""
    woken = threading.Event()
    take = Coalescer._batch_led_by

    def paused(self: Coalescer, leader: Any) -> list[Any]:
        if leader.body["payload"] == {"n": 1}:  # the call woken to send the second request
            woken.set()
            wait_until(lambda: len(self._waiting) == 1, 10, "the third call waiting")
        return take(self, leader)

    monkeypatch.setattr(Coalescer, "_batch_led_by", paused)
    with serving(Scripted([])) as scripted, Client(scripted.url, "t", retries=0) as client:
        batch = {"results": [{"status": 201, "job": {**JOB, "id": n}} for n in (8, 9)]}
        scripted.script += [Answer(201, JOB, delay=0.5), Answer(200, batch)]
        jobs: dict[int, Job] = {}

        def enqueue(n: int) -> None:
            jobs[n] = client.enqueue("email.send", {"n": n})

        threads = [threading.Thread(target=enqueue, args=(n,), daemon=True) for n in (0, 1, 2)]
        threads[0].start()
        wait_until(lambda: len(scripted.received) == 1, 10, "the first call in flight")
        threads[1].start()  # waits behind the first call, then sends the next request
        assert woken.wait(10), "the waiting call was woken to send"
        threads[2].start()  # arrives after the first answer, before the second request
        for thread in threads:
            thread.join(10)
        assert [path for _, path, _ in scripted.received] == ["/jobs", "/jobs/batch"]
        assert [item["payload"] for item in scripted.received[1][2]["jobs"]] == [
            {"n": 1},
            {"n": 2},
        ]
        assert {n: job.id for n, job in jobs.items()} == {0: 7, 1: 8, 2: 9}
