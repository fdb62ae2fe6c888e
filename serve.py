"""The production server of ``make serve``: granian on ``rsgi:app``, its settings and why.

Why granian and not gunicorn (measured side by side; figures in the README): granian reads
requests in Rust on an event loop, so idle, slow and silent connections cost no Python thread,
and its no-op floor is about three times gunicorn's ``gthread``. The bridge in ``app.serving``
adds the body deadline granian lacks. What ``gunicorn.conf.py`` did is kept:

- Prometheus multiprocess mode: ``PROMETHEUS_MULTIPROC_DIR`` is made (and emptied) here before
  any worker imports prometheus_client, so /metrics sums the figures of every worker; a worker
  that exits marks itself dead (``WSGIBridge.__rsgi_del__``) and a killed one is marked here.
- Graceful restart (SIGHUP): granian starts new workers and lets the old ones finish what they
  serve, for up to ``KILL_TIMEOUT`` seconds, longer than the longest long-poll (30 s).
- Replacement of a stuck worker: each worker's event loop renews a heartbeat file; a worker
  silent for ``QUEUELOG_WORKER_TIMEOUT`` seconds is killed here and granian starts a new one.

Settings (environment): ``QUEUELOG_BIND`` (host:port, default 127.0.0.1:8000),
``WEB_CONCURRENCY`` (processes, default one per core), ``QUEUELOG_THREADS`` (request threads per
process, default 32; the app lets half of them wait in long-polls), ``QUEUELOG_HEADER_TIMEOUT``
and ``QUEUELOG_BODY_TIMEOUT`` (seconds to receive a request's headers, then its body: default 10
and 30; a connection silent for the header timeout is closed), ``QUEUELOG_WORKER_TIMEOUT``
(default 60). Run it as ``python serve.py`` (an argument names another RSGI target, e.g.
``bench.noop_app:rsgi_app`` for the benchmark's floor).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from app.serving import silence_of

KILL_TIMEOUT = 35  # seconds a stopping worker may finish its requests (long-polls last <= 30)
WATCH_SECONDS = 2.0


def _seconds(name: str, default: int) -> int:
    raw = os.environ.get(name, str(default))
    if not raw.isdigit() or int(raw) < 1:
        raise SystemExit(f"{name} must be a whole number of seconds (1 or more), not {raw!r}")
    return int(raw)


def _bind() -> tuple[str, int]:
    bind = os.environ.get("QUEUELOG_BIND", "127.0.0.1:8000")
    host, _, port = bind.rpartition(":")
    if not host or not port.isdigit():
        raise SystemExit(f"QUEUELOG_BIND must be host:port (e.g. 0.0.0.0:8000), not {bind!r}")
    return host.strip("[]"), int(port)


def _watch(
    beats: Path, timeout: int, stop: threading.Event, mark_dead: Callable[[int], None]
) -> None:
    """Kill a worker whose heartbeat is older than ``timeout`` (its event loop is stuck) or
    drop the file of one that died; granian respawns the workers that exit.

    Everything it uses is imported before it starts: granian forks the workers, and a fork
    while this thread held the import lock would leave the child waiting for it forever."""
    while not stop.wait(WATCH_SECONDS):
        for beat in beats.glob("*.beat"):
            pid = int(beat.stem)
            with contextlib.suppress(FileNotFoundError):
                if _alive(pid) and silence_of(beat) <= timeout:
                    continue
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)
                beat.unlink()
                mark_dead(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def main(target: str = "rsgi:app") -> None:
    """Serve ``target`` until stopped (SIGINT/SIGTERM); SIGHUP restarts the workers
    gracefully."""
    if "MALLOC_ARENA_MAX" not in os.environ:
        # glibc gives each busy thread its own malloc arena and rarely returns them: with 32
        # request threads a process grew to 94-97 MB under attack, 89 MB with two arenas.
        # glibc reads the variable only when a process starts, so start again with it.
        os.environ["MALLOC_ARENA_MAX"] = "2"
        os.execv(sys.executable, [sys.executable, *sys.argv])  # noqa: S606 (this same program)
    from granian.constants import HTTPModes, Interfaces
    from granian.http import HTTP1Settings
    from granian.server import Server

    host, port = _bind()
    threads = _seconds("QUEUELOG_THREADS", 32)
    header_timeout = _seconds("QUEUELOG_HEADER_TIMEOUT", 10)
    if header_timeout > 60:
        raise SystemExit("QUEUELOG_HEADER_TIMEOUT can be at most 60 seconds (granian's bound)")
    _seconds("QUEUELOG_BODY_TIMEOUT", 30)  # checked here, read by each worker (rsgi.py)
    worker_timeout = _seconds("QUEUELOG_WORKER_TIMEOUT", 60)
    workers = _seconds("WEB_CONCURRENCY", os.cpu_count() or 1)
    made = tempfile.mkdtemp(prefix="queuelog-serve-")
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", os.path.join(made, "metrics"))
    metrics = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    metrics.mkdir(parents=True, exist_ok=True)
    for stale in metrics.glob("*.db"):  # figures of an earlier run must not be counted again
        stale.unlink()
    beats = Path(made) / "beats"
    beats.mkdir()
    os.environ["QUEUELOG_HEARTBEAT_DIR"] = str(beats)
    os.environ["QUEUELOG_THREADS"] = str(threads)
    # Only now, with PROMETHEUS_MULTIPROC_DIR set: prometheus_client picks its storage at import,
    # and the forked workers inherit the module.
    from prometheus_client import multiprocess

    stop = threading.Event()
    watch = (beats, worker_timeout, stop, multiprocess.mark_process_dead)
    watcher = threading.Thread(target=_watch, args=watch, daemon=True)
    watcher.start()
    try:
        Server(
            target,
            address=host,
            port=port,
            interface=Interfaces.RSGI,
            http=HTTPModes.http1,  # TLS and HTTP/2 are the reverse proxy's (see the README)
            websockets=False,
            workers=workers,
            http1_settings=HTTP1Settings(header_read_timeout=header_timeout * 1000),
            respawn_failed_workers=True,
            respawn_interval=1.0,
            workers_kill_timeout=KILL_TIMEOUT,
            working_dir=Path(__file__).resolve().parent,
        ).serve()
    finally:
        stop.set()
        shutil.rmtree(made, ignore_errors=True)


if __name__ == "__main__":
    main(*sys.argv[1:2])
