"""A throwaway PostgreSQL server for a test session or a benchmark (initdb in a temp folder,
stopped after). Without the server binaries it raises ``PostgresMissing``: the tests' fixture
skips then (or fails, under QUEUELOG_REQUIRE_POSTGRES=1), a benchmark says so.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import psycopg

BIN_DIRS = [Path(f"/usr/lib/postgresql/{v}/bin") for v in (17, 16, 15)]


class PostgresMissing(RuntimeError):
    """PostgreSQL server binaries not found; install Debian's postgresql to run."""


def bin_dir() -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl``, or None when PostgreSQL is not installed."""
    for directory in BIN_DIRS:
        if (directory / "initdb").exists():
            return directory
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_postgres(args: list[str]) -> list[str]:
    """initdb and pg_ctl refuse to run as root: run them as the postgres user then."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *args]
    return args


@contextmanager
def postgres_server(
    *, durable: bool = False, settings: Mapping[str, str] | None = None
) -> Iterator[str]:
    """Start a server on 127.0.0.1 and yield its base URL (no database name).

    Tests run without fsync; ``durable`` (benchmarks) keeps fsync and synchronous_commit on.
    ``settings`` are more server settings (``{"shared_preload_libraries": ...}``): those read
    only at start.
    """
    binaries = bin_dir()
    if binaries is None:
        raise PostgresMissing(PostgresMissing.__doc__)
    folder = Path(tempfile.mkdtemp(prefix="queuelog-pg-"))
    data, log = folder / "data", folder / "server.log"
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    port = _free_port()
    subprocess.run(
        _as_postgres(
            [
                str(binaries / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ]
        ),
        cwd="/",
        check=True,
        capture_output=True,
        timeout=60,
    )
    sync = "-c fsync=on -c synchronous_commit=on" if durable else "-c fsync=off"
    extra = "".join(f" -c {shlex.quote(f'{k}={v}')}" for k, v in (settings or {}).items())
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} {sync}{extra}"
    subprocess.run(
        _as_postgres(
            [
                str(binaries / "pg_ctl"),
                "-D",
                str(data),
                "-l",
                str(log),
                "-w",
                "-t",
                "30",
                "-o",
                options,
                "start",
            ]
        ),
        cwd="/",
        check=True,
        capture_output=True,
        timeout=60,
    )
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run(
            _as_postgres([str(binaries / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]),
            cwd="/",
            capture_output=True,
            timeout=60,
            check=False,
        )
        shutil.rmtree(folder, ignore_errors=True)


def create_database(server: str, name: str) -> str:
    """Create database ``name`` on the server at base URL ``server``; returns its URL."""
    admin = f"{server.replace('+psycopg', '')}/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{server}/{name}"
