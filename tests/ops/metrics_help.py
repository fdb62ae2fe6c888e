"""Reading a Prometheus exposition in tests: samples by family, name and labels."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

FAMILIES = {
    "queuelog_jobs": ("gauge", {"status", "type"}),
    "queuelog_oldest_due_job_age_seconds": ("gauge", {"type"}),
    "queuelog_type_paused": ("gauge", {"type"}),
    "queuelog_jobs_waiting": ("gauge", {"type"}),
    "queuelog_oldest_waiting_job_age_seconds": ("gauge", {"type"}),
    "queuelog_partition_jobs_due": ("gauge", {"type", "partition"}),
    "queuelog_partition_jobs_running": ("gauge", {"type", "partition"}),
    "queuelog_jobs_enqueued": ("counter", {"type"}),
    "queuelog_jobs_finished": ("counter", {"type", "outcome"}),
    "queuelog_job_wait_seconds": ("histogram", {"type"}),
    "queuelog_job_run_seconds": ("histogram", {"type"}),
    "queuelog_http_requests": ("counter", {"route", "status"}),
    "queuelog_http_request_duration_seconds": ("histogram", {"route"}),
}


def parse(text: str) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    """Family name -> [(sample name, labels, value)]; raises if the text does not parse."""
    found: dict[str, list[tuple[str, dict[str, str], float]]] = {}
    types = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        found.setdefault(family.name, []).extend(
            (s.name, dict(s.labels), s.value) for s in family.samples
        )
    for name, (kind, _) in FAMILIES.items():
        assert types.get(name) == kind, (name, types.get(name))
    return found


def value(
    families: dict[str, list[tuple[str, dict[str, str], float]]], sample: str, **labels: str
) -> float:
    """The sum of the samples named ``sample`` whose labels include ``labels``."""
    family = next(f for f in sorted(families, key=len, reverse=True) if sample.startswith(f))
    return sum(
        v
        for name, have, v in families[family]
        if name == sample and all(have.get(k) == w for k, w in labels.items())
    )
