"""``Client``: the API's routes as methods, for producers, scripts and the worker runner."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from queuelog_client.bodies import claim_body, enqueue_body, enqueue_item
from queuelog_client.coalescing import Coalescer, send_one
from queuelog_client.models import Event, Job, JobType, Schedule
from queuelog_client.tracing import outgoing_headers
from queuelog_client.transport import Transport, retry_after

FINISHED = frozenset({"completed", "failed", "cancelled"})
MAX_WAIT = 30  # seconds one GET /jobs/{id}?wait_seconds= may wait
SCHEDULE_OPTIONS = frozenset({"timezone", "priority", "enabled", "catch_up", "partition"})
BATCH_SIZE = 1000  # the server's default MAX_BATCH
LONG_POLL_MARGIN = 10.0  # seconds a long-poll request may take beyond its wait


@dataclass(frozen=True)
class Finished:
    """What ``Client.finish_and_claim`` got: each outcome's answer in order, the jobs claimed,
    and, when the server refused to let the claim wait, how long to pause before asking again
    (its ``Retry-After``)."""

    results: list[dict[str, Any]]
    jobs: list[Job]
    retry_after: float | None = None


class _Keep:
    """The default of ``set_limits``' fields: leave that override as it is."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()


class Client:
    """A connection to a queuelog server, authenticated with an API token.

    Every call has a timeout (``timeout`` seconds; long-polls get their wait on top). Reads and
    idempotent writes are retried with exponential backoff and full jitter on network errors,
    429 (after ``Retry-After``) and 5xx, up to ``retries`` times; cancel and retry are resent only
    when the server cannot have applied them. Errors raise ``QueuelogError`` subclasses.

    One client may be shared by threads. Their ``enqueue`` calls coalesce (``coalesce=False``
    turns it off): a call made while another's request is in flight goes in the next request
    with the others that arrived meanwhile, one batch admitting each on its own; each caller
    still gets its own job or exception, and a call that finds nothing in flight goes at once."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = 10.0,
        retries: int = 5,
        coalesce: bool = True,
    ) -> None:
        if not token:
            raise ValueError("a queuelog API token is required")
        self.url = url
        self.transport = Transport(url, token, timeout=timeout, retries=retries)
        self._coalescer = Coalescer(self.transport) if coalesce else None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections."""
        self.transport.close()

    # Producers and scripts

    def enqueue(self, type: str, payload: dict[str, Any] | None = None, **options: Any) -> Job:
        """Enqueue one job (``POST /jobs``). ``options``: priority, max_retries,
        idempotency_key, run_at (aware datetime or ISO 8601 string), delay_seconds,
        unique_key, unique_for, secrets (a dict of names to strings, stored encrypted and
        handed only to the worker that claims the job), and the workflow fields depends_on,
        on_dependency_failure and group (sent as given), and partition (a tenant or customer:
        claims serve the partitions of one priority in turn). Without an idempotency key a random
        one is sent, so the retries this client makes after a lost answer return the same job
        instead of a second one. With OpenTelemetry installed, the active trace context goes
        along. Calls from several threads at once share requests (see ``Client``)."""
        body = enqueue_body(enqueue_item(type, payload, options))
        if self._coalescer is None:
            return send_one(self.transport, body, outgoing_headers())
        return self._coalescer.enqueue(body, outgoing_headers())

    def enqueue_many(self, items: Iterable[Mapping[str, Any]]) -> list[Job]:
        """Enqueue many jobs (``POST /jobs/batch``, up to 1,000 per request); ``items`` are
        ``POST /jobs`` bodies. Returns the jobs in order. Each request is all or nothing; when a
        later one is refused, the jobs of the earlier ones stay enqueued."""
        bodies = [enqueue_body(item) for item in items]
        jobs: list[Job] = []
        for start in range(0, len(bodies), BATCH_SIZE):
            chunk = bodies[start : start + BATCH_SIZE]
            response = self.transport.request(
                "POST",
                "/jobs/batch",
                json={"jobs": chunk},
                headers=outgoing_headers(),
                idempotent=True,
            )
            jobs += [Job.from_json(job) for job in response.json()["jobs"]]
        return jobs

    def get(self, job_id: int) -> Job:
        """One job (``GET /jobs/{id}``); ``NotFound`` when it does not exist or is not yours."""
        return Job.from_json(self._get(f"/jobs/{int(job_id)}"))

    def wait(self, job_id: int, timeout: float) -> Job:
        """The job once it is finished (completed, failed or cancelled), or as it is after
        ``timeout`` seconds: long-polls ``GET /jobs/{id}?wait_seconds=`` until then."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            wait = max(0, min(MAX_WAIT, math.ceil(remaining)))
            response = self.transport.request(
                "GET",
                f"/jobs/{int(job_id)}",
                params={"wait_seconds": wait},
                idempotent=True,
                timeout=wait + LONG_POLL_MARGIN,
            )
            job = Job.from_json(response.json())
            if job.status in FINISHED or time.monotonic() >= deadline:
                return job
            pause = retry_after(response, MAX_WAIT)  # the server had too many waiting
            if pause:
                time.sleep(min(pause, max(0.0, deadline - time.monotonic())))

    def spawn(self, job_id: int, attempt: int, items: Iterable[Mapping[str, Any]]) -> list[Job]:
        """Workers: enqueue children of the job held at ``attempt`` (``POST
        /jobs/{id}/children``, up to 100 per call); ``items`` are ``POST /jobs`` bodies. They
        belong to the job's producer and carry ``parent_id``."""
        body = {"attempt": attempt, "jobs": [enqueue_body(item) for item in items]}
        response = self.transport.request(
            "POST",
            f"/jobs/{int(job_id)}/children",
            json=body,
            headers=outgoing_headers(),
            idempotent=True,
        )
        return [Job.from_json(job) for job in response.json()["jobs"]]

    def jobs(self, **filters: Any) -> Iterator[Job]:
        """Every job matching ``filters`` (status, type, priority, q, partition, limit = page
        size), newest first, fetched page by page as the iterator is consumed (``GET /jobs``)."""
        params = {name: value for name, value in filters.items() if value is not None}
        while True:
            page = self._get("/jobs", params=params)
            yield from (Job.from_json(job) for job in page["jobs"])
            if not page.get("next_cursor"):
                return
            params["cursor"] = page["next_cursor"]

    def cancel(self, job_id: int) -> Job:
        """Cancel a pending job (admins: any unfinished one); ``Conflict`` when finished."""
        return self._post_job(f"/jobs/{int(job_id)}/cancel")

    def retry(self, job_id: int) -> Job:
        """Admins: put a failed or cancelled job back in the queue with a fresh retry budget."""
        return self._post_job(f"/jobs/{int(job_id)}/retry")

    def events(self, job_id: int) -> list[Event]:
        """A job's history, oldest first (``GET /jobs/{id}/events``)."""
        return [Event.from_json(e) for e in self._get(f"/jobs/{int(job_id)}/events")["events"]]

    def logs(self, job_id: int) -> list[dict[str, Any]]:
        """Admins: a job's attempt logs, ``[{"attempt", "lines": [{"at", "text"}]}]`` oldest
        first (``GET /jobs/{id}/logs``)."""
        attempts: list[dict[str, Any]] = self._get(f"/jobs/{int(job_id)}/logs")["attempts"]
        return attempts

    # Admins: job types (pause, resume, limits) and schedules

    def types(self) -> list[JobType]:
        """Every configured job type with its jobs per status and limits (``GET /types``)."""
        return [JobType.from_json(item) for item in self._get("/types")["types"]]

    def pause(self, job_type: str) -> JobType:
        """Pause a job type: claims hand out none of its jobs until it is resumed."""
        return self.set_limits(job_type, paused=True)

    def resume(self, job_type: str) -> JobType:
        """Resume a paused job type."""
        return self.set_limits(job_type, paused=False)

    def set_limits(
        self,
        job_type: str,
        *,
        max_running: int | None = KEEP,
        rate_limit: str | None = KEEP,
        paused: bool | None = KEEP,
        max_run_seconds: int | None = KEEP,
        partition_max_running: int | None = KEEP,
        partition_rate_limit: str | None = KEEP,
    ) -> JobType:
        """Override a job type's limits (``PATCH /types/{type}``): each value given replaces
        the server's configuration, ``None`` clears the override (the configured value applies
        again), a value left out keeps its override. ``rate_limit`` is like ``"10/minute"``;
        the ``partition_`` limits apply in each partition of the type on its own."""
        changes = {
            "max_running": max_running, "rate_limit": rate_limit, "paused": paused,
            "max_run_seconds": max_run_seconds, "partition_max_running": partition_max_running,
            "partition_rate_limit": partition_rate_limit,
        }  # fmt: skip
        body = {name: value for name, value in changes.items() if value is not KEEP}
        if not body:
            raise TypeError(f"give at least one of {', '.join(changes)}")
        path = f"/types/{quote(job_type, safe='')}"
        response = self.transport.request("PATCH", path, json=body, idempotent=True)
        return JobType.from_json(response.json())

    def schedules(self) -> list[Schedule]:
        """Every schedule, by name (``GET /schedules``)."""
        return [Schedule.from_json(item) for item in self._get("/schedules")["schedules"]]

    def schedule(self, schedule_id: int) -> Schedule:
        """One schedule (``GET /schedules/{id}``); ``NotFound`` when there is none."""
        return Schedule.from_json(self._get(f"/schedules/{int(schedule_id)}"))

    def create_schedule(
        self, name: str, cron: str, type: str, payload: dict[str, Any] | None = None, **options: Any
    ) -> Schedule:
        """Create a schedule (``POST /schedules``). ``options``: timezone (IANA, default
        UTC), priority, enabled, catch_up (``"skip"`` or ``"one"``), partition (of its jobs).
        ``Conflict`` when the
        name is taken. Not resent after it may have reached the server."""
        unknown = set(options) - SCHEDULE_OPTIONS
        if unknown:
            raise TypeError(f"unknown schedule option(s): {', '.join(sorted(unknown))}")
        body = {"name": name, "cron": cron, "type": type, "payload": payload or {}, **options}
        response = self.transport.request("POST", "/schedules", json=body, idempotent=False)
        return Schedule.from_json(response.json())

    def update_schedule(self, schedule_id: int, **changes: Any) -> Schedule:
        """Change the given fields of a schedule (``PATCH /schedules/{id}``): any of name,
        cron, timezone, type, payload, priority, enabled, catch_up."""
        path = f"/schedules/{int(schedule_id)}"
        response = self.transport.request("PATCH", path, json=changes, idempotent=True)
        return Schedule.from_json(response.json())

    def delete_schedule(self, schedule_id: int) -> None:
        """Delete a schedule; the jobs it enqueued stay (``DELETE /schedules/{id}``)."""
        self.transport.request("DELETE", f"/schedules/{int(schedule_id)}", idempotent=False)

    def run_schedule(self, schedule_id: int) -> Job:
        """Enqueue one job of the schedule now (``POST /schedules/{id}/run``); its fire times
        stay as they are."""
        return self._post_job(f"/schedules/{int(schedule_id)}/run")

    # Workers (the batch routes the ``Worker`` is built on)

    def claim(
        self,
        *,
        max_jobs: int,
        types: list[str] | None = None,
        wait_seconds: float = 0,
        lease_seconds: int | None = None,
        retries: int | None = None,
    ) -> list[Job]:
        """Claim up to ``max_jobs`` due jobs (``POST /jobs/claim``), waiting up to
        ``wait_seconds`` for one to become due; an empty list when none did. Not retried after
        it may have reached the server (claimed jobs would be held for nothing)."""
        return self.finish_and_claim(
            [],
            max_jobs=max_jobs,
            types=types,
            wait_seconds=wait_seconds,
            lease_seconds=lease_seconds,
            retries=retries,
        ).jobs

    def finish(
        self, results: list[dict[str, Any]], *, retries: int | None = None
    ) -> list[dict[str, Any]]:
        """Report outcomes (``POST /jobs/finish``); one answer per item, in order."""
        body = {"results": results}
        response = self.transport.request(
            "POST", "/jobs/finish", json=body, idempotent=True, retries=retries
        )
        answers: list[dict[str, Any]] = response.json()["results"]
        return answers

    def finish_and_claim(
        self,
        results: list[dict[str, Any]],
        *,
        max_jobs: int,
        types: list[str] | None = None,
        wait_seconds: float = 0,
        lease_seconds: int | None = None,
        retries: int | None = None,
    ) -> Finished:
        """Report outcomes, then claim up to ``max_jobs`` due jobs, in one request
        (``POST /jobs/finish`` with a ``claim``): the outcomes are applied first, then jobs are
        claimed as ``claim`` would, waiting up to ``wait_seconds`` for one. With no ``results``
        it is a plain ``POST /jobs/claim``, the same answer without a write for nothing. Not
        retried after it may have reached the server (claimed jobs would be held for nothing);
        the outcomes may be sent again, their attempts fence them."""
        claim = claim_body(max_jobs, types, wait_seconds, lease_seconds)
        body = {"results": results, "claim": claim} if results else claim
        response = self.transport.request(
            "POST",
            "/jobs/finish" if results else "/jobs/claim",
            json=body,
            idempotent=False,
            timeout=self.transport.timeout + wait_seconds + LONG_POLL_MARGIN,
            retries=retries,
        )
        answer = {} if response.status_code == 204 else response.json()  # 204: none claimed
        jobs = [Job.from_json(job) for job in answer.get("jobs", [])]
        pause = None if jobs else retry_after(response, MAX_WAIT)
        return Finished(answer.get("results", []), jobs, pause)

    def heartbeat(
        self, items: list[dict[str, Any]], *, retries: int | None = None
    ) -> list[dict[str, Any]]:
        """Extend the leases of running jobs, with progress (``POST /jobs/heartbeat``); one
        answer per item, in order (409 items say when a job was cancelled)."""
        response = self.transport.request(
            "POST", "/jobs/heartbeat", json={"jobs": items}, idempotent=True, retries=retries
        )
        answers: list[dict[str, Any]] = response.json()["results"]
        return answers

    def append_logs(
        self, job_id: int, attempt: int, lines: list[str], *, retries: int | None = None
    ) -> dict[str, Any]:
        """Workers: append up to 100 lines to the log of the attempt held (``POST
        /jobs/{id}/logs``); ``{"accepted", "dropped"}``. Not sent again once it may have
        reached the server (the lines would be stored twice). ``ctx.log`` batches for you."""
        response = self.transport.request(
            "POST",
            f"/jobs/{int(job_id)}/logs",
            json={"attempt": attempt, "lines": lines},
            idempotent=False,
            retries=retries,
        )
        answer: dict[str, Any] = response.json()
        return answer

    def release(self, job_id: int, attempt: int, *, retries: int | None = None) -> Job:
        """Give a claimed job back unstarted: pending again at once, retry count unchanged."""
        response = self.transport.request(
            "POST",
            f"/jobs/{int(job_id)}/release",
            json={"attempt": attempt},
            idempotent=True,
            retries=retries,
        )
        return Job.from_json(response.json())

    def _get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        return self.transport.request("GET", path, params=params, idempotent=True).json()

    def _post_job(self, path: str) -> Job:
        return Job.from_json(self.transport.request("POST", path, idempotent=False).json())
