"""Real processes, real signals: gunicorn with 4 workers, client processes, kill -9."""

from __future__ import annotations

import contextlib
import http.client
import json
import queue
import signal
import subprocess
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from devservers.servers import Client, Gunicorn, prepare_database, running
from tests.harness import Agents, query

pytestmark = pytest.mark.slow

WORKER_PROCESSES = 8
PRODUCER_PROCESSES = 2
JOBS_PER_PRODUCER = 210


def test_v06_concurrent_claims_through_gunicorn(tmp_path: Path, agents: Agents) -> None:
    """V-06 / issue 3: 8 worker processes race 2 producers through 4 gunicorn workers."""
    users = {f"producer-{i}": "producer" for i in range(PRODUCER_PROCESSES)}
    users |= {f"worker-{i}": "worker" for i in range(WORKER_PROCESSES)}
    database = prepare_database(tmp_path / "db", users)
    start, stop = tmp_path / "start", tmp_path / "stop"
    with running(Gunicorn(database, tmp_path, workers=4)) as server:
        workers = [
            agents.spawn(
                "work", server.host, database.tokens[f"worker-{i}"], start=start, stop=stop
            )
            for i in range(WORKER_PROCESSES)
        ]
        producers = [
            agents.spawn(
                "produce",
                server.host,
                database.tokens[f"producer-{i}"],
                start=start,
                count=JOBS_PER_PRODUCER,
                prefix=f"p{i}",
            )
            for i in range(PRODUCER_PROCESSES)
        ]
        start.touch()  # everyone starts at once
        produced = [Agents.result(p) for p in producers]
        stop.touch()
        worked = [Agents.result(w) for w in workers]
        log = server.log_tail()

    created = {job_id for report in produced for job_id in report["created"].values()}
    claims = [job_id for report in worked for job_id, _attempt in report["claimed"]]
    duplicates = sum(n - 1 for n in Counter(claims).values() if n > 1)
    errors = [e for report in produced + worked for e in report["errors"]]
    statuses: Counter[str] = Counter()
    for report in produced + worked:
        statuses.update(report["statuses"])
    rows = query(database.path, "SELECT id, status, attempts FROM jobs")
    events = Counter(
        (job_id, kind)
        for job_id, kind in query(database.path, "SELECT job_id, kind FROM job_events")
    )
    lost = created - set(claims)
    not_completed = [r for r in rows if r[1] != "completed" or r[2] != 1]
    bad_history = [
        job_id
        for job_id, _, _ in rows
        if (events[job_id, "enqueued"], events[job_id, "claimed"], events[job_id, "completed"])
        != (1, 1, 1)
    ]
    active = sum(1 for report in worked if report["claimed"])
    figures = (
        f"jobs={len(created)} rows={len(rows)} client processes={len(workers) + len(producers)} "
        f"(workers={len(workers)}, of which claimed something={active}; producers="
        f"{len(producers)}) gunicorn workers=4 claims={len(claims)} duplicates={duplicates} "
        f"lost={len(lost)} errors={len(errors)} statuses={dict(sorted(statuses.items()))}"
    )
    print(f"\nV-06 race: {figures}")
    context = f"{figures}\nerrors: {errors[:5]}\nserver log:\n{log}"
    assert len(created) == PRODUCER_PROCESSES * JOBS_PER_PRODUCER, context
    assert errors == [], context
    assert duplicates == 0, context
    assert lost == set(), context
    assert len(rows) == len(created) and not not_completed, context
    assert bad_history == [], context
    assert set(statuses) <= {"enqueue 201", "claim 200", "claim 204", "complete 200"}, context


ENQUEUE_THREADS = 4
ACKS_BEFORE_KILL = 120


def test_kill_9_server_while_enqueuing_keeps_every_acknowledged_job(tmp_path: Path) -> None:
    """Every 201 was committed: kill -9 of master and workers mid-write loses none of them."""
    database = prepare_database(tmp_path / "db", {"producer": "producer"})
    server = Gunicorn(database, tmp_path, workers=4)  # SQLITE_SYNCHRONOUS: the default (FULL)
    acknowledged: dict[str, int] = {}  # idempotency key -> id, for every 201
    unanswered: list[str] = []  # sent, but the connection died before an answer
    other: list[str] = []
    lock = threading.Lock()
    enough = threading.Event()

    def enqueue(thread: int) -> None:
        client = Client(server.host, database.tokens["producer"], timeout=10)
        for n in range(10_000):
            key = f"t{thread}-{n}"
            try:
                status, job, _ = client.post(
                    "/jobs", {"type": "email.send", "idempotency_key": key}
                )
            except (OSError, http.client.HTTPException):
                with lock:
                    unanswered.append(key)
                return  # the server is gone
            with lock:
                if status == 201:
                    acknowledged[key] = job["id"]
                    if len(acknowledged) >= ACKS_BEFORE_KILL:
                        enough.set()
                else:
                    other.append(f"{key} -> {status} {job}")
                    return

    try:
        server.start()
        with ThreadPoolExecutor(ENQUEUE_THREADS) as pool:
            futures = [pool.submit(enqueue, t) for t in range(ENQUEUE_THREADS)]
            assert enough.wait(60), f"only {len(acknowledged)} acknowledged: {other}"
            server.kill_9()  # while the threads are still sending
            for future in futures:
                future.result(timeout=30)
        server.start()  # same database file, fresh processes
        client = Client(server.host, database.tokens["producer"])
        found = {}
        for key, job_id in acknowledged.items():
            status, job, _ = client.get(f"/jobs/{job_id}")
            if status == 200 and job["idempotency_key"] == key:
                found[key] = job_id
        # The requests that never got an answer either committed or not, but at most once:
        # repeating them with the same key answers 200 (it was there) or 201 (it was not).
        repeats = Counter(
            client.post("/jobs", {"type": "email.send", "idempotency_key": key})[0]
            for key in unanswered
        )
    finally:
        server.stop()
    rows = query(database.path, "SELECT idempotency_key, COUNT(*) FROM jobs GROUP BY 1")
    duplicated = [key for key, count in rows if count != 1]
    # each surviving job was written with its event in one transaction: both or neither
    torn = query(
        database.path,
        "SELECT j.id FROM jobs j LEFT JOIN job_events e ON e.job_id = j.id"
        " GROUP BY j.id HAVING COUNT(e.id) != 1 OR MAX(e.kind) != 'enqueued'",
    )
    figures = (
        f"threads={ENQUEUE_THREADS} acknowledged={len(acknowledged)} found after restart="
        f"{len(found)} unanswered at the kill={len(unanswered)} (on repeat: {dict(repeats)}) "
        f"rows={len(rows)} duplicated={len(duplicated)} torn={len(torn)}"
    )
    print(f"\nkill -9 of the server while enqueuing: {figures}")
    assert other == [], figures
    assert found == acknowledged, figures
    assert set(repeats) <= {200, 201}, figures
    assert duplicated == [], figures
    assert torn == [], figures


HELD = 4
EXTRA = 2


def _lines(process: subprocess.Popen[str], count: int, timeout: float) -> list[dict[str, Any]]:
    """Read ``count`` JSON lines from an agent's stdout, waiting at most ``timeout`` seconds."""
    assert process.stdout is not None
    stdout = process.stdout
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        with contextlib.suppress(ValueError, OSError):  # the pipe is closed when the test ends
            for line in stdout:
                lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        try:
            got.append(json.loads(lines.get(timeout=max(deadline - time.monotonic(), 0.01))))
        except queue.Empty:
            raise AssertionError(f"agent gave {len(got)} of {count} lines in {timeout}s") from None
    return got


def test_kill_9_worker_holding_leases_jobs_reclaimed_and_completed_once(
    tmp_path: Path, agents: Agents
) -> None:
    """A worker killed mid-job: its leases expire, others (and its own restarted process with the
    same token) re-claim and complete each job once; its late calls with the old attempt get 409."""
    users = {"producer": "producer", "stale": "worker", "other": "worker"}
    database = prepare_database(tmp_path / "db", users)
    server = Gunicorn(database, tmp_path, LEASE_SECONDS=2, BACKOFF_BASE_SECONDS=0)
    with running(server):
        producer = Client(server.host, database.tokens["producer"])
        ids = [producer.post("/jobs", {"type": "email.send"})[1]["id"] for _ in range(HELD + EXTRA)]
        holder = agents.spawn("hold", server.host, database.tokens["stale"], count=HELD)
        claims = _lines(holder, HELD + 1, timeout=30)[:HELD]
        assert all(c["status"] == 200 and c["attempt"] == 1 for c in claims), claims
        held = {c["id"] for c in claims}
        holder.kill()  # SIGKILL, by pid: the worker dies holding its leases
        holder.wait(10)
        assert holder.returncode == -signal.SIGKILL

        # The same identity in a new process, and another worker, keep claiming.
        restarted = Client(server.host, database.tokens["stale"])
        other = Client(server.host, database.tokens["other"])
        stale_refusals: list[tuple[str, str, int, str]] = []
        completed: Counter[int] = Counter()
        reclaimed: dict[int, tuple[str, int]] = {}
        deadline = time.monotonic() + 30
        turn = 0
        while len(completed) < len(ids) and time.monotonic() < deadline:
            name, client = [("stale", restarted), ("other", other)][turn % 2]
            turn += 1
            status, job, _ = client.post("/jobs/claim")
            if status == 204:
                time.sleep(0.1)
                continue
            assert status == 200, job
            if job["id"] in held:
                reclaimed[job["id"]] = (name, job["attempt"])
                # the dead process's calls, arriving late with its old attempt
                for action in ("complete", "heartbeat", "fail"):
                    body: dict[str, Any] = {"attempt": 1}
                    if action == "fail":
                        body["error"] = "late"
                    late, problem, _ = restarted.post(f"/jobs/{job['id']}/{action}", body)
                    stale_refusals.append((name, action, late, problem["detail"]))
            status, done, _ = client.post(
                f"/jobs/{job['id']}/complete", {"attempt": job["attempt"], "result": {"by": name}}
            )
            assert status == 200 and done["status"] == "completed", done
            completed[job["id"]] += 1
        after, problem, _ = restarted.post(f"/jobs/{claims[0]['id']}/complete", {"attempt": 1})
    rows = {
        job_id: (status, attempts, retry_count)
        for job_id, status, attempts, retry_count in query(
            database.path, "SELECT id, status, attempts, retry_count FROM jobs"
        )
    }
    events = Counter(query(database.path, "SELECT job_id, kind, actor FROM job_events"))
    completions = Counter(
        job_id for (job_id, kind, _), n in events.items() for _ in range(n) if kind == "completed"
    )
    figures = (
        f"jobs={len(ids)} held by the killed worker={len(held)} re-claimed={len(reclaimed)} "
        f"({sorted(reclaimed.values())}) completed exactly once="
        f"{sum(1 for n in completions.values() if n == 1)} stale calls refused="
        f"{sum(1 for _, _, s, _ in stale_refusals if s == 409)}/{len(stale_refusals)}"
    )
    print(f"\nkill -9 of a worker holding leases: {figures}")
    assert set(reclaimed) == held, figures
    assert all(attempt == 2 for _, attempt in reclaimed.values()), figures
    assert completions == {job_id: 1 for job_id in ids}, figures
    # Same token: the attempt fences it. Another worker's token: identity does.
    why = {"stale": "attempt 1 is stale", "other": "not held by you"}
    assert all(
        status == 409 and why[claimer] in detail for claimer, _, status, detail in stale_refusals
    ), (figures, stale_refusals)
    assert {claimer for claimer, *_ in stale_refusals} == {"stale", "other"}, stale_refusals
    assert after == 409, problem
    for job_id in ids:
        expected = (2, 1) if job_id in held else (1, 0)
        assert rows[job_id] == ("completed", *expected), (job_id, rows[job_id])
    for job_id in held:
        assert events[job_id, "lease_expired", None] == 1, events


RACES = 20


def test_complete_vs_fail_race_through_gunicorn(tmp_path: Path) -> None:
    """The holder sends complete and fail for the same attempt at once: one wins, one gets 409."""
    database = prepare_database(tmp_path / "db", {"producer": "producer", "worker": "worker"})
    outcomes: Counter[str] = Counter()
    with running(Gunicorn(database, tmp_path)) as server:
        producer = Client(server.host, database.tokens["producer"])
        for _ in range(RACES):
            producer.post("/jobs", {"type": "email.send", "max_retries": 0})
        claimer = Client(server.host, database.tokens["worker"])
        for _ in range(RACES):
            status, job, _ = claimer.post("/jobs/claim")
            assert status == 200, job
            barrier = threading.Barrier(2, timeout=10)

            def send(action: str, job: dict[str, Any] = job, barrier: Any = barrier) -> int:
                client = Client(server.host, database.tokens["worker"])
                body: dict[str, Any] = {"attempt": job["attempt"]}
                if action == "fail":
                    body["error"] = "boom"
                barrier.wait()
                return client.post(f"/jobs/{job['id']}/{action}", body)[0]

            with ThreadPoolExecutor(2) as pool:
                complete = pool.submit(send, "complete")
                fail = pool.submit(send, "fail")
                answers = (complete.result(timeout=30), fail.result(timeout=30))
            outcomes[f"complete {answers[0]} / fail {answers[1]}"] += 1
    rows = dict(query(database.path, "SELECT id, status FROM jobs"))
    history = {
        job_id: [
            kind
            for j, kind in query(database.path, "SELECT job_id, kind FROM job_events ORDER BY id")
            if j == job_id
        ]
        for job_id in rows
    }
    print(f"\ncomplete vs fail, {RACES} races through gunicorn: {dict(outcomes)}")
    assert set(outcomes) <= {"complete 200 / fail 409", "complete 409 / fail 200"}, outcomes
    for job_id, status in rows.items():
        assert status in ("completed", "failed"), (job_id, status)
        final = "completed" if status == "completed" else "failed"
        assert history[job_id] == ["enqueued", "claimed", final], (job_id, history[job_id])
    assert sum(outcomes.values()) == RACES
