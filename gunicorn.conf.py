"""gunicorn settings (read from the working directory): Prometheus multiprocess mode, so
/metrics adds up the HTTP figures of every worker of this server."""

import os
import shutil
import tempfile
from pathlib import Path

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
