"""The bench's reading of the server's own counters: requests per job by route and status from
a real /metrics answer, and empty looks once the server has looked."""

from __future__ import annotations

from collections import Counter

from bench.server_counts import Tally, parse
from tests.builders import Api


def _counts(admin: Api) -> Tally:
    response = admin.get("/metrics")
    assert response.status_code == 200
    return Tally(counts=parse(response.get_data(as_text=True)))


def test_requests_counted_by_route_and_status(admin: Api, producer: Api, worker: Api) -> None:
    before = _counts(admin).counts
    producer.enqueue()
    producer.enqueue()
    job = worker.claim()
    assert job is not None and worker.claim() is not None
    assert worker.claim() is None  # nothing left: 204
    done = {"id": job["id"], "attempt": job["attempt"], "outcome": "completed"}
    assert worker.post("/jobs/finish", {"results": [done]}).status_code == 200
    run = Tally(jobs=2, counts=_counts(admin).counts - before)

    assert run.route("/jobs") == 1.0  # two POST /jobs for two jobs
    assert run.route("/jobs/claim") == 1.5
    assert run.route("/jobs/claim", "200") == 1.0
    assert run.route("/jobs/claim", "204") == 0.5
    assert run.route("/jobs/finish") == 0.5
    line = run.line("trickle")
    assert "runner 2.00 = claims 1.50 (with jobs 1.00, empty 0.50) + finishes 0.50" in line
    assert "heartbeats 0.00" in line and "producer 1.00" in line


def test_empty_looks_are_n_a_before_the_first_look(admin: Api) -> None:
    exposition = admin.get("/metrics").get_data(as_text=True)
    requests_only = Counter({k: n for k, n in parse(exposition).items() if k[0] != "looks"})
    assert "empty looks n/a" in Tally(jobs=10, counts=requests_only).line("trickle")

    looks = (
        "# HELP queuelog_claim_looks_total Claim tries, by what they found.\n"
        "# TYPE queuelog_claim_looks_total counter\n"
        'queuelog_claim_looks_total{source="request",found="no"} 1.0\n'
        'queuelog_claim_looks_total{source="dispatcher",found="no"} 2.0\n'
        'queuelog_claim_looks_total{source="dispatcher",found="yes"} 9.0\n'
    )
    counted = requests_only + parse(looks)
    assert "empty looks 0.30" in Tally(jobs=10, counts=counted).line("trickle")
