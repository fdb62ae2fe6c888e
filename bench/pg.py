"""PostgreSQL end to end: queuelog through its SDK next to pgqueuer driven as its docs show.

One durable throwaway server (fsync and synchronous_commit on), a database for each system,
rounds alternating between the two, each after a CHECKPOINT.

* queuelog: ``make serve``'s server (serve.py) and 4 worker processes running the
  SDK's ``Worker`` (long-poll claims of up to 50 jobs, outcomes sent in batches by its
  reporter); bulk = one producer enqueueing with ``POST /jobs/batch`` in batches of 100 while
  the workers drain, timed from the first batch until every job is completed. Each run follows
  a warm-up drain, since its workers stay up between runs; the first timed run follows an
  untimed one and ANALYZE.
* pgqueuer: bench/pgqueuer_peer.py, as its documentation shows (4 QueueManager processes with
  the defaults, jobs enqueued in one call before the timed drain). Its figure is checked
  against its reference (bench/references.py) before a ratio is printed.

The server runs pg_stat_statements: each side's timed bulk runs also give PostgreSQL's
execution time per job, and queuelog's by statement (bench/pg_time.py). Then one more, untimed,
bulk run of queuelog counts the statements it sends per batch request (bench/pg_statements.py;
those of single requests of each route and size: ``SECTION=statements``, bench/pg_requests.py).
"""

from __future__ import annotations

import statistics
from pathlib import Path

import psycopg

from bench import pg_statements, pg_time, pgqueuer_peer
from bench.e2e import (
    BATCH,
    CLAIMED,
    CLAIMS,
    FINISHED,
    FINISHES,
    PICKUP_EVERY,
    PICKUP_JOBS,
    Queuelog,
    bulk,
    fsync_ms,
    jobs_per_section,
    line,
    load,
    percentiles,
    pickup,
    rounds_per_section,
    warm_up,
)
from devservers.postgres import create_database, postgres_server


def _sql(dsn: str, statement: str) -> None:
    """One statement outside a transaction (ANALYZE, CHECKPOINT)."""
    with psycopg.connect(dsn.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute(statement)


def _admin(url: str) -> str:
    """The server's own database, for psycopg, from any database's URL on it."""
    return url.replace("+psycopg", "").rsplit("/", 1)[0] + "/postgres"


def _settle(system: Queuelog, jobs: int) -> None:
    """One untimed bulk run, then ANALYZE: the timed rounds meet tables with rows and planner
    statistics, as a queue in use has, rather than a fresh database's empty ones."""
    bulk(system, jobs)
    _sql(system.database.url, "ANALYZE")


def _queuelog_round(
    system: Queuelog, jobs: int, figures: dict[str, list[float]], timed: pg_time.Tally
) -> list[int]:
    """Bulk then pickup; returns what the workers' claims and finishes added during the bulk
    run (bench.e2e's counters)."""
    warm_up(system)
    _sql(system.database.url, "CHECKPOINT")  # no checkpoint left over from the last round
    before = system.counts[:]
    # The server's counters are read over HTTP outside the statements' time.
    with (
        system.counted("bulk", jobs),
        pg_time.measured(_admin(system.database.url), "queuelog", timed, jobs),
    ):
        figures["bulk"].append(bulk(system, jobs))
    batching = [after - was for after, was in zip(system.counts[:], before, strict=True)]
    warm_up(system)
    p50, p99 = pickup(system, PICKUP_JOBS)
    figures["p50"].append(p50)
    figures["p99"].append(p99)
    return batching


def _pgqueuer_round(
    dsn: str, jobs: int, figures: dict[str, list[float]], timed: pg_time.Tally
) -> float:
    """Bulk then pickup; returns the seconds of the bulk run's one enqueue call."""
    _sql(dsn, "CHECKPOINT")
    with pg_time.measured(_admin(dsn), "pgqueuer", timed, jobs):
        rate, enqueue_seconds = pgqueuer_peer.drain(dsn, jobs)
    figures["bulk"].append(rate)
    p50, p99 = percentiles(pgqueuer_peer.pickup(dsn, PICKUP_JOBS, PICKUP_EVERY))
    figures["p50"].append(p50)
    figures["p99"].append(p99)
    return enqueue_seconds


def _print_batching(batching: list[int], enqueue_seconds: list[float], jobs: int) -> None:
    """How each side's bulk runs were driven, as measured rather than as configured."""
    claims, claimed = batching[CLAIMS], batching[CLAIMED]
    finishes, finished = batching[FINISHES], batching[FINISHED]
    if claims and finishes:
        print(
            f"  queuelog's workers in the bulk runs: {claims} claims of {claimed / claims:.1f} "
            f"jobs on average, {finishes} finishes of {finished / finishes:.1f} outcomes "
            f"({finishes / claims:.2f} finishes per claim on average)"
        )
    print(
        f"  pgqueuer's one enqueue call of {jobs} jobs took "
        f"{1000 * min(enqueue_seconds):.0f}-{1000 * max(enqueue_seconds):.0f} ms "
        "(before its timed drain, as in its reference)"
    )


def run(base: Path) -> None:
    """Bulk drain and pickup latency on PostgreSQL, queuelog next to pgqueuer."""
    jobs, rounds = jobs_per_section(), rounds_per_section()
    with postgres_server(durable=True, settings=pg_time.SETTINGS) as server:
        print(
            f"end to end, PostgreSQL (fsync, synchronous_commit on), {jobs} no-op jobs, "
            f"4 worker processes each, median (best) of {rounds} rounds:"
        )
        started, fsync = load(), fsync_ms(base)
        dsn = create_database(server, "pgqueuer").replace("+psycopg", "")
        pg_time.install(_admin(dsn))
        pgqueuer_peer.install(dsn)
        system = Queuelog(base / "queuelog", url=create_database(server, "queuelog"))
        ours: dict[str, list[float]] = {"bulk": [], "p50": [], "p99": []}
        theirs: dict[str, list[float]] = {"bulk": [], "p50": [], "p99": []}
        batching = [0, 0, 0, 0]
        enqueue_seconds: list[float] = []
        timed = {"queuelog": pg_time.Tally(), "pgqueuer": pg_time.Tally()}
        try:
            _settle(system, jobs)
            _sql(dsn, "ANALYZE")  # the peer's tables too, though its drain leaves them empty
            for n in range(rounds):
                for side in ("queuelog", "pgqueuer") if n % 2 == 0 else ("pgqueuer", "queuelog"):
                    if side == "queuelog":
                        added = _queuelog_round(system, jobs, ours, timed["queuelog"])
                        batching = [
                            total + more for total, more in zip(batching, added, strict=True)
                        ]
                    else:
                        enqueue_seconds.append(
                            _pgqueuer_round(dsn, jobs, theirs, timed["pgqueuer"])
                        )
            line(
                f"bulk (batches of {BATCH})",
                ours["bulk"],
                theirs["bulk"],
                "jobs/s",
                "pgqueuer",
                reference="pgqueuer",
            )
            line("pickup p50", ours["p50"], theirs["p50"], "ms", "pgqueuer")
            line("pickup p99 (goal: <= 50 ms)", ours["p99"], theirs["p99"], "ms", "pgqueuer")
            _print_batching(batching, enqueue_seconds, jobs)
            system.print_requests()
            pg_time.report(timed["queuelog"], timed["pgqueuer"], statistics.median(theirs["bulk"]))
            print(f"  load average {started} at the start, {load()} at the end; fsync {fsync}")
            pg_statements.probe(system, _admin(dsn), jobs)
        finally:
            system.close()
