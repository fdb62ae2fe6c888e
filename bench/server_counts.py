"""What queuelog's server counted while a run went through it, per job of the run: the requests
it answered by route and status (/metrics' ``queuelog_http_requests_total``, summed over the
server's processes), and the claims' empty looks.

The runner's requests per job (claims, finishes, heartbeats) say how many round trips a job
costs; an empty look is a claim's try that found nothing (a waiter woken by a commit whose job
another waiter took, or a request's own look), read from
``queuelog_claim_looks_total{found="no"}`` over both sources (requests and the dispatcher).
Before the server's first look that figure prints as n/a.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from devservers.servers import metrics

REQUESTS = "queuelog_http_requests"
LOOKS = "queuelog_claim_looks"  # labels source: "request" or "dispatcher"; found: "yes" or "no"
RUNNER = {"/jobs/claim": "claims", "/jobs/finish": "finishes", "/jobs/heartbeat": "heartbeats"}
PRODUCER = ("/jobs", "/jobs/batch")  # the label is the route alone: no list is read in a run
Key = tuple[str, ...]  # ("http", route, status) or ("looks", found, source)


def parse(exposition: str) -> Counter[Key]:
    """The request and look counters of a /metrics answer."""
    counts: Counter[Key] = Counter()
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            if family.name == REQUESTS:
                counts["http", sample.labels["route"], sample.labels["status"]] += int(sample.value)
            elif family.name == LOOKS:
                labels = sample.labels
                counts["looks", labels["found"], labels["source"]] += int(sample.value)
    return counts


def scrape(host: str, token: str) -> Counter[Key]:
    """The counters of the server at ``host`` (a monitor's ``token``)."""
    return parse(metrics(host, token))


@dataclass
class Tally:
    """What the server counted over every run of one scenario, and those runs' jobs."""

    jobs: int = 0
    counts: Counter[Key] = field(default_factory=Counter)

    def per_job(self, key: Key) -> float:
        """How many of ``key`` per job."""
        return self.counts[key] / max(self.jobs, 1)

    def route(self, route: str, status: str | None = None) -> float:
        """Requests per job to ``route`` (with ``status``, or any)."""
        return sum(
            self.per_job(key)
            for key in self.counts
            if key[:2] == ("http", route) and (status is None or key[2] == status)
        )

    def line(self, scenario: str) -> str:
        """Requests per job of the runner and the producer, and empty looks per job."""
        runner = {name: self.route(route) for route, name in RUNNER.items()}
        errors = sum(
            self.per_job(key)
            for key in self.counts
            if key[0] == "http" and key[1] in (*RUNNER, *PRODUCER) and int(key[2]) >= 400
        )
        looked = any(key[0] == "looks" for key in self.counts)
        by_request = self.per_job(("looks", "no", "request"))
        by_dispatcher = self.per_job(("looks", "no", "dispatcher"))
        empty = (
            f"{by_request + by_dispatcher:.2f} (requests {by_request:.2f}, dispatcher"
            f" {by_dispatcher:.2f})"
            if looked
            else "n/a"
        )
        return (
            f"  queuelog's requests per job, {scenario} ({self.jobs} jobs, the server's counters): "
            f"runner {sum(runner.values()):.2f} = claims {runner['claims']:.2f} "
            f"(with jobs {self.route('/jobs/claim', '200'):.2f}, empty "
            f"{self.route('/jobs/claim', '204'):.2f}) + finishes {runner['finishes']:.2f} + "
            f"heartbeats {runner['heartbeats']:.2f} (goal: <= 1.3); producer "
            f"{sum(self.route(route) for route in PRODUCER):.2f}; empty looks {empty} "
            f"(goal: <= 0.1)" + (f"; answered 4xx/5xx {errors:.2f}" if errors else "")
        )


class Requests:
    """The server's counters around each counted run, by scenario."""

    def __init__(self, host: str, token: str) -> None:
        self.host, self.token = host, token
        self.tallies: dict[str, Tally] = {}

    @contextmanager
    def counted(self, scenario: str, jobs: int) -> Iterator[None]:
        """Add what the server counts while the body runs (a run of ``jobs`` jobs)."""
        before = scrape(self.host, self.token)
        yield
        after = scrape(self.host, self.token)
        tally = self.tallies.setdefault(scenario, Tally())
        tally.jobs += jobs
        tally.counts.update(after - before)

    def print(self) -> None:
        """One line per scenario counted."""
        for scenario, tally in self.tallies.items():
            print(tally.line(scenario))
