"""Client processes for the multi-process tests: ``python -m tests.reliability.agents MODE ...``.

Each mode talks to a real server over 127.0.0.1, is bounded by ``--deadline`` seconds, and
prints JSON on stdout (one document, or one line per event for ``hold``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from devservers.servers import Client


def _wait_for(path: Path, deadline: float) -> None:
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"start signal {path} never came")
        time.sleep(0.005)


def work(args: argparse.Namespace) -> dict[str, Any]:
    """Claim and complete until nothing is claimable and the producers are done."""
    deadline = time.monotonic() + args.deadline
    client = Client(args.host, args.token)
    _wait_for(Path(args.start), deadline)
    stop = Path(args.stop)
    claimed: list[list[int]] = []  # [job id, attempt]
    statuses: Counter[str] = Counter()
    errors: list[str] = []
    while time.monotonic() < deadline:
        status, job, _ = client.post("/jobs/claim")
        statuses[f"claim {status}"] += 1
        if status == 204:
            if stop.exists():
                # one more look: a job enqueued just before the stop file may still wait
                status, job, _ = client.post("/jobs/claim")
                statuses[f"claim {status}"] += 1
                if status == 204:
                    break
            else:
                time.sleep(0.05)
                continue
        if status != 200:
            errors.append(f"claim -> {status} {job}")
            continue
        claimed.append([job["id"], job["attempt"]])
        body = {"attempt": job["attempt"], "result": {"pid": os.getpid()}}
        status, done, _ = client.post(f"/jobs/{job['id']}/complete", body)
        statuses[f"complete {status}"] += 1
        if status != 200 or done["status"] != "completed":
            errors.append(f"complete {job['id']} -> {status} {done}")
    else:
        errors.append("deadline reached before the queue drained")
    return {"pid": os.getpid(), "claimed": claimed, "statuses": statuses, "errors": errors}


def produce(args: argparse.Namespace) -> dict[str, Any]:
    """Enqueue ``--count`` jobs with idempotency keys ``<prefix>-<n>``."""
    deadline = time.monotonic() + args.deadline
    client = Client(args.host, args.token)
    _wait_for(Path(args.start), deadline)
    created: dict[str, int] = {}
    statuses: Counter[str] = Counter()
    errors: list[str] = []
    for n in range(args.count):
        if time.monotonic() > deadline:
            errors.append("deadline reached while enqueuing")
            break
        key = f"{args.prefix}-{n}"
        body = {"type": "email.send", "payload": {"n": n}, "idempotency_key": key}
        status, job, _ = client.post("/jobs", body)
        statuses[f"enqueue {status}"] += 1
        if status == 201:
            created[key] = job["id"]
        else:
            errors.append(f"enqueue {key} -> {status} {job}")
    return {"pid": os.getpid(), "created": created, "statuses": statuses, "errors": errors}


def hold(args: argparse.Namespace) -> None:
    """Claim ``--count`` jobs, report each on its own line, then hang (until killed)."""
    deadline = time.monotonic() + args.deadline
    client = Client(args.host, args.token)
    held = 0
    while held < args.count and time.monotonic() < deadline:
        status, job, _ = client.post("/jobs/claim")
        if status == 204:
            time.sleep(0.01)
            continue
        line = {"status": status, "id": job.get("id"), "attempt": job.get("attempt")}
        print(json.dumps(line), flush=True)
        held += status == 200
    print(json.dumps({"holding": held, "pid": os.getpid()}), flush=True)
    while time.monotonic() < deadline:  # a worker stuck in its job: only SIGKILL ends it
        time.sleep(0.1)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["work", "produce", "hold"])
    parser.add_argument("--host", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--start", default="")
    parser.add_argument("--stop", default="")
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--prefix", default="job")
    parser.add_argument("--deadline", type=float, default=60.0)
    args = parser.parse_args(argv)
    if args.mode == "hold":
        hold(args)
        return
    result = work(args) if args.mode == "work" else produce(args)
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
