"""The SQL statements queuelog sends PostgreSQL per batch request, counted in the server's log.

After the timed rounds (logging every statement slows the server, so the figures are taken
without it) the server is told to log each statement with its database and backend pid, one
more bulk run goes through queuelog, and the log's new lines are counted: each statement sent
as a simple query, or each execution of a prepared one (its parse and bind lines are not
counted), from queuelog's database, leaving out the bench's own connection that counts
completed jobs. The batch requests of that run (batch enqueues, claims that returned jobs,
finishes) come from the workers' counters, so the figure is statements per batch request.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

import psycopg

from bench.e2e import BATCH, CLAIMS, FINISHES, Queuelog, bulk

# A logged statement: "<time> [<pid>] <database> LOG:  duration: <ms> ms  statement: <sql>" or
# "... execute <name>: <sql>" (the prefix is set below).
LOGGED = re.compile(r"\[(\d+)\] (\S+) LOG:  duration: \S+ ms  (?:statement|execute [^:]*): (.*)")
SHOWN = 4  # the most frequent statements printed, by their first words


def log_statements(admin_url: str) -> Path:
    """Log every statement from now on; returns the server's log file (where the throwaway
    server of devservers/postgres.py writes it, next to its data folder)."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET log_min_duration_statement = 0")
        conn.execute("ALTER SYSTEM SET log_line_prefix = '%m [%p] %d '")
        conn.execute("SELECT pg_reload_conf()")
        row = conn.execute("SHOW data_directory").fetchone()
    time.sleep(0.5)  # every backend rereads its settings before its next statement
    return Path(row[0] if row else "").parent / "server.log"


def count(lines: list[str], database: str, skip_pid: int) -> Counter[str]:
    """Statements of ``database`` in ``lines``, by their first five words, less ``skip_pid``'s."""
    counted: Counter[str] = Counter()
    for line in lines:
        match = LOGGED.search(line)
        if match and match[2] == database and int(match[1]) != skip_pid:
            counted[" ".join(match[3].split()[:5])] += 1
    return counted


def probe(system: Queuelog, admin_url: str, jobs: int) -> None:
    """One logged bulk run of ``jobs`` through ``system``; prints statements per request."""
    log = log_statements(admin_url)
    if not log.exists():
        print(f"  statements not counted: no server log at {log}")
        return
    system.completed()  # opens the bench's counting connection, whose pid is left out
    before, start = system.counts[:], log.stat().st_size
    bulk(system, jobs)
    with log.open("rb") as file:
        file.seek(start)
        lines = file.read().decode(errors="replace").splitlines()
    statements = count(lines, "queuelog", system.watch.info.backend_pid)
    batches = -(-jobs // BATCH)
    claims = system.counts[CLAIMS] - before[CLAIMS]
    finishes = system.counts[FINISHES] - before[FINISHES]
    requests = batches + claims + finishes
    total = sum(statements.values())
    print(
        f"  queuelog's statements in one more bulk run of {jobs} jobs, logged: {total} for "
        f"{requests} batch requests ({batches} enqueues, {claims} claims, {finishes} finishes; "
        f"idle long-polls included) = {total / requests:.1f} per request, "
        f"{total / jobs:.1f} per job; most sent:"
    )
    for words, times in statements.most_common(SHOWN):
        print(f"    {times / jobs:5.2f} per job  {words} ...")
