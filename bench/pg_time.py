"""PostgreSQL's execution time per job, from pg_stat_statements: what the database itself spends
on each system's jobs, both measured on one server in one run.

The server starts with the extension preloaded (``SETTINGS``). Before each timed run the
statistics are reset; after it, the top-level statements of that system's database are read,
their ``total_exec_time`` summed over the rounds and divided by the rounds' jobs. What a
statement's triggers do is inside that statement's time; planning is not counted. The bench's
own statements (its CHECKPOINTs and ANALYZE, emptying and counting pgqueuer's tables, the poll
that counts queuelog's completed jobs) are left out, and the output says how much they were.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg

from bench.references import against_reference

SETTINGS = {"shared_preload_libraries": "pg_stat_statements"}
# The bench's own statements, by the start of their normalized text.
BENCH_OWN = (
    "CHECKPOINT",
    "ANALYZE",
    "TRUNCATE pgqueuer",
    "SELECT count(*) FROM pgqueuer",
    "SELECT coalesce(sum(completed)",  # bench.e2e.COMPLETED
)
SHOWN = 10  # queuelog's statements printed, by time per job
SHORT = 100  # characters of a statement's text printed

_READ = """
SELECT s.queryid, s.query, s.calls, s.total_exec_time
FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
WHERE d.datname = %s AND s.toplevel
"""


@dataclass
class Statement:
    """One normalized statement: its text, its calls and its execution milliseconds."""

    query: str
    calls: int = 0
    ms: float = 0.0


@dataclass
class Tally:
    """One database's statements over every timed run, and the jobs of those runs."""

    jobs: int = 0
    statements: dict[int, Statement] = field(default_factory=dict)
    bench_ms: float = 0.0  # the bench's own statements, left out of the figures

    def add(self, rows: list[tuple[int, str, int, float]], jobs: int) -> None:
        """Add one run's statements (queryid, text, calls, milliseconds) and its jobs."""
        self.jobs += jobs
        for queryid, query, calls, ms in rows:
            if query.lstrip().startswith(BENCH_OWN):
                self.bench_ms += ms
                continue
            statement = self.statements.setdefault(queryid, Statement(" ".join(query.split())))
            statement.calls += calls
            statement.ms += ms

    def us_per_job(self) -> float:
        """Execution microseconds per job."""
        return 1000 * sum(s.ms for s in self.statements.values()) / max(self.jobs, 1)

    def calls_per_job(self) -> float:
        """Statements executed per job."""
        return sum(s.calls for s in self.statements.values()) / max(self.jobs, 1)

    def top(self) -> list[Statement]:
        """The statements that took the most time, most first."""
        return sorted(self.statements.values(), key=lambda s: s.ms, reverse=True)[:SHOWN]


def install(admin_url: str) -> None:
    """Create the extension in the server's own database (its view there reads every
    database's statements)."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")


@contextmanager
def measured(admin_url: str, database: str, tally: Tally, jobs: int) -> Iterator[None]:
    """Reset the statistics, run the body (a timed run of ``jobs`` jobs), and add what
    ``database``'s statements took meanwhile to ``tally``."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")
        yield
        rows = conn.execute(_READ, (database,)).fetchall()
    tally.add([(int(q), str(text), int(c), float(ms)) for q, text, c, ms in rows], jobs)


def report(ours: Tally, theirs: Tally, peer_bulk: float) -> None:
    """Execution time per job on both sides (a ratio only when the peer ran near its
    reference), then queuelog's statements by time per job."""
    allowed, note = against_reference("pgqueuer", peer_bulk)
    ratio = theirs.us_per_job() / ours.us_per_job() if ours.us_per_job() else float("nan")
    print(
        "  PostgreSQL's execution time per job (pg_stat_statements, top-level statements, "
        "timed bulk runs):"
    )
    print(
        f"    queuelog {ours.us_per_job():6.0f} µs per job ({ours.calls_per_job():.2f} "
        f"statements)   pgqueuer {theirs.us_per_job():6.0f} µs per job "
        f"({theirs.calls_per_job():.2f} statements)   "
        + (f"ratio {ratio:.2f} (goal: <= 200 µs per job)" if allowed else note)
    )
    print(
        f"    left out, the bench's own statements: queuelog "
        f"{1000 * ours.bench_ms / max(ours.jobs, 1):.0f} µs per job, pgqueuer "
        f"{1000 * theirs.bench_ms / max(theirs.jobs, 1):.0f}"
    )
    print("    queuelog's statements by execution time per job:")
    print(f"    {'µs/job':>8} {'calls/job':>9}  statement")
    for statement in ours.top():
        text = statement.query
        shown = text if len(text) <= SHORT else text[: SHORT - 3] + "..."
        us, calls = 1000 * statement.ms / ours.jobs, statement.calls / ours.jobs
        print(f"    {us:8.1f} {calls:9.4f}  {shown}")
