"""Client processes of the multi-app-server test: ``python -m tests.reliability.fleet MODE ...``.

Each process prefers one app server and fails over to the next when its server stops answering.
The wire calls are the three small functions at the top (batch enqueue, claims of several jobs,
batch finish). Each mode is bounded by ``--deadline`` and prints one JSON report.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from devservers.servers import Client

LEASE_SECONDS = 2  # short, so jobs held by a killed server come back quickly
WAIT_SECONDS = 1
ENQUEUE_CHUNK = 100  # keys sent per call (one batch request each)
MAX_JOBS = 10  # jobs per claim, so every worker process gets a share


def enqueue(client: Client, keys: list[str]) -> list[tuple[int, Any]]:
    """Enqueue one job per idempotency key in one batch; (status, job) per key (201 created,
    200 an idempotent replay, or the batch's own status with the problem for every key)."""
    jobs = [{"type": "email.send", "idempotency_key": key} for key in keys]
    status, body, _ = client.post("/jobs/batch", {"jobs": jobs})
    if status not in (200, 201):
        return [(status, body)] * len(keys)
    return [
        (201 if new else 200, job) for job, new in zip(body["jobs"], body["created"], strict=True)
    ]


def claim(client: Client) -> tuple[int, list[Any]]:
    """Long-poll for up to ``MAX_JOBS`` jobs; (status, jobs)."""
    body = {"lease_seconds": LEASE_SECONDS, "wait_seconds": WAIT_SECONDS, "max_jobs": MAX_JOBS}
    status, answer, _ = client.post("/jobs/claim", body)
    return status, answer["jobs"] if status == 200 else []


def finish(client: Client, jobs: list[Any]) -> list[tuple[int, Any]]:
    """Report every job completed in one request; (status, item answer) per job."""
    if not jobs:
        return []
    results = [
        {
            "id": job["id"],
            "attempt": job["attempt"],
            "outcome": "completed",
            "result": {"pid": os.getpid()},
        }
        for job in jobs
    ]
    status, body, _ = client.post("/jobs/finish", {"results": results})
    if status != 200:
        return [(status, body)] * len(jobs)
    return [(item["status"], item) for item in body["results"]]


class Servers:
    """The app servers in preference order; a connection error moves to the next one."""

    def __init__(self, hosts: list[str], token: str) -> None:
        self.clients = [Client(host, token, timeout=10) for host in hosts]
        self.failovers = 0

    @property
    def current(self) -> Client:
        return self.clients[0]

    def fail_over(self) -> None:
        self.current.close()
        self.clients.append(self.clients.pop(0))
        self.failovers += 1
        time.sleep(0.05)


def _hosts(args: argparse.Namespace) -> list[str]:
    hosts: list[str] = args.hosts.split(",")
    return hosts[args.prefer :] + hosts[: args.prefer]


def produce(args: argparse.Namespace) -> dict[str, Any]:
    """Enqueue ``--count`` jobs keyed ``<prefix>-<n>``; resend a chunk after a lost answer."""
    deadline = time.monotonic() + args.deadline
    servers = Servers(_hosts(args), args.token)
    keys = [f"{args.prefix}-{n}" for n in range(args.count)]
    statuses: Counter[str] = Counter()
    errors: list[str] = []
    while keys and time.monotonic() < deadline:
        chunk = keys[:ENQUEUE_CHUNK]
        try:
            answers = enqueue(servers.current, chunk)
        except (OSError, http.client.HTTPException):
            servers.fail_over()  # idempotency keys make the resend safe
            continue
        for key, (status, job) in zip(chunk, answers, strict=True):
            statuses[f"enqueue {status}"] += 1
            if status not in (200, 201):
                errors.append(f"enqueue {key} -> {status} {job}")
        del keys[: len(chunk)]
    if keys:
        errors.append(f"deadline reached with {len(keys)} jobs not enqueued")
    return {"statuses": statuses, "errors": errors, "failovers": servers.failovers}


def work(args: argparse.Namespace) -> dict[str, Any]:
    """Claim and complete until the stop file exists and a long-poll comes back empty."""
    deadline = time.monotonic() + args.deadline
    servers = Servers(_hosts(args), args.token)
    stop = Path(args.stop)
    completed: list[int] = []
    statuses: Counter[str] = Counter()
    errors: list[str] = []
    while time.monotonic() < deadline:
        try:
            status, jobs = claim(servers.current)
            statuses[f"claim {status}"] += 1
            statuses["claimed"] += len(jobs)
            if status == 204 and stop.exists():
                break
            if status not in (200, 204):
                errors.append(f"claim -> {status}")
            for job, (status, done) in zip(jobs, finish(servers.current, jobs), strict=True):
                statuses[f"complete {status}"] += 1
                if status == 200:
                    completed.append(job["id"])
                elif status != 409:  # 409: its lease expired and another attempt took over
                    errors.append(f"complete {job['id']} -> {status} {done}")
        except (OSError, http.client.HTTPException):
            servers.fail_over()  # a job held through the dead server comes back by its lease
    else:
        errors.append("deadline reached before the queue drained")
    return {
        "completed": completed,
        "statuses": statuses,
        "errors": errors,
        "failovers": servers.failovers,
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["work", "produce"])
    parser.add_argument("--hosts", required=True)
    parser.add_argument("--prefer", type=int, default=0)
    parser.add_argument("--token", required=True)
    parser.add_argument("--stop", default="")
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--prefix", default="job")
    parser.add_argument("--deadline", type=float, default=50.0)
    args = parser.parse_args(argv)
    json.dump(work(args) if args.mode == "work" else produce(args), sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
