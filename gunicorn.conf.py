"""gunicorn settings for those who deploy with plain gunicorn (``gunicorn -c gunicorn.conf.py
wsgi:app``; ``make serve`` runs granian, see ``serve.py``): threaded workers that long-polls
cannot starve, and Prometheus multiprocess mode so /metrics adds up the HTTP figures of every
worker. gunicorn has no request body timeout: a client that stops sending its body holds a
thread, so put a buffering reverse proxy in front (see the README).

Why threads: a long-polling claim (``wait_seconds`` up to 30) occupies a request handler while it
sleeps, and a client that sends its body slowly occupies one while the body trickles in. With
gunicorn's sync workers either takes a whole process, so four of them stall the service. A
``gthread`` worker serves each request in one of ``threads`` threads, so a process keeps
answering while some threads wait; a waiting claim holds no database connection or lock, only
its thread. gevent is not used: its monkey-patching does not make sqlite3's C calls (a write
waiting on SQLite's busy timeout) cooperative, so one would stall every greenlet of the process.

Every value can be overridden from the command line or ``GUNICORN_CMD_ARGS``.
"""

import os
import shutil
import tempfile
from pathlib import Path

bind = os.environ.get("QUEUELOG_BIND", "127.0.0.1:8000")
# Processes: WEB_CONCURRENCY (gunicorn's convention), else two per core.
workers = int(os.environ.get("WEB_CONCURRENCY", 2 * (os.cpu_count() or 1)))
worker_class = "gthread"
# Requests served at once per process: long-polls, slow clients and everything else. The app
# reads the same variable and lets at most half of them wait in long-polls.
threads = int(os.environ.get("QUEUELOG_THREADS", 32))
# gthread's heartbeat comes from the main loop, so a 30 s long-poll never trips it; a worker
# silent for this long is stuck and is replaced.
timeout = 60
# Longer than the longest long-poll (30 s), so a graceful restart lets waiting claims answer.
graceful_timeout = 35
keepalive = 5
# Header limits stay at gunicorn's defaults; bodies are bounded by MAX_CONTENT_LENGTH in the app.
control_socket_disable = True

# Set before any worker imports prometheus_client: it picks its storage at import time.
_created = not os.environ.get("PROMETHEUS_MULTIPROC_DIR")
if _created:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="queuelog-metrics-")
METRICS_DIR = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])


def on_starting(server):
    """Figures of an earlier run of this server must not be counted again."""
    METRICS_DIR.mkdir(parents=True, exist_ok=True)
    for stale in METRICS_DIR.glob("*.db"):
        stale.unlink()


def child_exit(server, worker):
    """A worker that exits keeps its counters; only its live gauges are dropped."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    """Remove the folder this configuration made."""
    if _created:
        shutil.rmtree(METRICS_DIR, ignore_errors=True)
