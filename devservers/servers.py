"""Real server processes for the multi-process tests and the benchmarks: a prepared database,
gunicorn, signals.

Everything listens on 127.0.0.1 only, every wait is bounded, and a server is always stopped
(SIGTERM, then SIGKILL) by the process-group id it was started with.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self, TypeVar

from devservers.keepalive import KeepAlive
from devservers.sockets import read_answer

REPO = Path(__file__).resolve().parent.parent
SECRET = "reliability-secret-key-Vb7Kq2Lx9-Rm4Tz0Wc6Np1Hs8Fy3Dj5Ga"
JOB_TYPES = ["email.send", "report.build", "webhook.deliver"]
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


@dataclass
class Database:
    """A migrated database (a SQLite file, or ``server_url`` on PostgreSQL) with users and
    their API tokens."""

    path: Path
    tokens: dict[str, str] = field(default_factory=dict)
    server_url: str | None = None

    @property
    def url(self) -> str:
        return self.server_url or f"sqlite:///{self.path}"


def app_settings(database: Database, **config: Any) -> dict[str, Any]:
    """The config an in-process app on ``database`` uses (same keys as the server's env)."""
    return {
        "SECRET_KEY": SECRET,
        "DATABASE_URL": database.url,
        "JOB_TYPES": JOB_TYPES,
        **config,
    }


def prepare_database(
    directory: Path,
    users: Mapping[str, str],
    *,
    url: str | None = None,
    caps: Mapping[str, str] | None = None,
) -> Database:
    """Migrate a fresh SQLite file in ``directory`` (or the empty PostgreSQL database at
    ``url``) and create ``users`` (name -> role) with one API token each; ``caps``: a user's
    highest priority, when not the default (critical for producers, medium for the others)."""
    from app import create_app  # here, so client processes import only the stdlib
    from app.infra import db  # here, so client processes import only the stdlib
    from app.storage import migrate
    from devservers.accounts import make_token, make_user

    directory.mkdir(parents=True, exist_ok=True)
    database = Database(directory / "queuelog.sqlite3", server_url=url)
    app = create_app(app_settings(database))
    try:
        migrate.upgrade(db.engine(app))
        for name, role in users.items():
            cap = (caps or {}).get(name, "critical" if role == "producer" else "medium")
            make_user(app, name, role, max_priority=cap)
            database.tokens[name] = make_token(app, name)
    finally:
        db.close(app)
    return database


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(database: Database, **config: Any) -> dict[str, str]:
    """The process environment for a server on ``database``; ``config`` becomes FLASK_*."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLASK_")}
    for key, value in app_settings(database, **config).items():
        env[f"FLASK_{key}"] = json.dumps(value)
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Server:
    """A production server process on a free port, in its own process group; subclasses give
    its command line."""

    name = "server"

    def __init__(
        self,
        database: Database,
        log_dir: Path,
        *,
        workers: int = 4,
        threads: int | None = None,
        env: Mapping[str, str] | None = None,
        **config: Any,
    ) -> None:
        self.database = database
        self.workers = workers
        self.env = server_env(database, **config)
        if threads is not None:  # the server's handlers per process, read by the app as well
            self.env["QUEUELOG_THREADS"] = str(threads)
        self.env.update(env or {})
        self.log_dir = log_dir
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """The command line that serves on ``self.host``."""
        raise NotImplementedError

    def start(self) -> Self:
        """Start and wait until a worker answers HTTP (bounded; retries a port taken meanwhile)."""
        for _ in range(3):
            self.port = free_port()
            self.starts += 1
            log = (self.log_dir / f"{self.name}-{self.starts}.log").open("wb")
            self.process = subprocess.Popen(
                self.command(),
                cwd=REPO,
                env={**self.env, "QUEUELOG_BIND": self.host, "WEB_CONCURRENCY": str(self.workers)},
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: kill_9 takes the workers too
            )
            log.close()
            if self.answers():
                return self
            self.stop()
        raise RuntimeError(f"{self.name} did not start; see {self.log_dir}\n{self.log_tail()}")

    def worker_pids(self) -> list[int]:
        """The process ids of the server's workers (the children of its main process)."""
        assert self.process is not None
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        return [int(pid) for pid in children.read_text().split()]

    def answers(self) -> bool:
        """Wait (bounded) until the app answers HTTP here; False if the server exited first."""
        deadline = time.monotonic() + START_TIMEOUT
        assert self.process is not None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            with contextlib.suppress(OSError, http.client.HTTPException):
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                try:
                    conn.request("GET", "/jobs")
                    if conn.getresponse().status == 401:  # the app itself answered
                        return True
                finally:
                    conn.close()
            time.sleep(0.05)
        return False

    def stop(self) -> int | None:
        """SIGTERM the process group, SIGKILL it if it lingers; returns the master's exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.process.wait(STOP_TIMEOUT)
        self._signal(signal.SIGKILL)  # orphaned workers, if any
        return self.process.returncode

    def kill_9(self) -> None:
        """SIGKILL the master and every worker at once: a crash, not a shutdown."""
        assert self.process is not None
        self._signal(signal.SIGKILL)
        self.process.wait(STOP_TIMEOUT)

    def _signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)  # the group id is the master's pid

    def log_tail(self, lines: int = 40) -> str:
        """The end of the latest server log, for assertion messages."""
        path = self.log_dir / f"{self.name}-{self.starts}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


class Gunicorn(Server):
    """gunicorn serving ``wsgi:app`` with ``gunicorn.conf.py`` (the plain-gunicorn deployment)."""

    name = "gunicorn"

    def command(self) -> list[str]:
        return [
            *(sys.executable, "-m", "gunicorn", "-c", str(REPO / "gunicorn.conf.py")),
            *("-w", str(self.workers), "-b", self.host, "--no-control-socket"),
            *("--graceful-timeout", "5", "--timeout", "30", "wsgi:app"),
        ]


class Served(Server):
    """The server of ``make serve`` (``serve.py``: granian on ``rsgi:app``)."""

    name = "served"

    def command(self) -> list[str]:
        return [sys.executable, str(REPO / "serve.py")]


ServerT = TypeVar("ServerT", bound=Server)


@contextlib.contextmanager
def running(server: ServerT) -> Iterator[ServerT]:
    """Start ``server`` and stop it whatever happens."""
    try:
        server.start()
        yield server
    finally:
        server.stop()


class Client:
    """A tiny JSON client over one kept-alive connection (http.client, no extra packages; what
    is safe to send again after the server closed it: ``devservers.keepalive``)."""

    def __init__(self, host: str, token: str, timeout: float = 20.0) -> None:
        self.host, _, port = host.partition(":")
        self.port = int(port)
        self.token = token
        self.timeout = timeout
        self._conn: KeepAlive | None = None

    def request(
        self, method: str, path: str, body: Any = None, headers: Mapping[str, str] | None = None
    ) -> tuple[int, Any, dict[str, str]]:
        """Send one request; returns (status, decoded JSON or None, headers)."""
        all_headers = {"Authorization": f"Bearer {self.token}", **(headers or {})}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            all_headers["Content-Type"] = "application/json"
        if self._conn is None:
            self._conn = KeepAlive(self.host, self.port, self.timeout)
        response, raw = self._conn.exchange(method, path, data, all_headers)
        decoded = json.loads(raw) if raw else None
        return response.status, decoded, {k.lower(): v for k, v in response.getheaders()}

    def post(self, path: str, body: Any = None, **kw: Any) -> tuple[int, Any, dict[str, str]]:
        return self.request("POST", path, body, **kw)

    def get(self, path: str) -> tuple[int, Any, dict[str, str]]:
        return self.request("GET", path)

    def closed_by_server(self, wait: float = 0.0) -> bool:
        """Whether the server has closed the kept connection, waiting up to ``wait`` seconds."""
        return self._conn is not None and self._conn.closed_by_server(wait)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __del__(self) -> None:
        # The server keeps connections alive, so a client dropped without close() still holds
        # an open socket; close it rather than leave it to a ResourceWarning.
        self.close()


def metrics(host: str, token: str) -> str:
    """The /metrics exposition of the server at ``host`` (a monitor's or an admin's token)."""
    name, _, port = host.partition(":")
    conn = http.client.HTTPConnection(name, int(port), timeout=30)
    try:
        conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {token}"})
        response = conn.getresponse()
        body = response.read().decode()
    finally:
        conn.close()
    if response.status != 200:
        raise RuntimeError(f"GET /metrics answered {response.status}: {body[:300]}")
    return body


def send_on_new_sockets(port: int, data: bytes, count: int) -> list[socket.socket]:
    """Open ``count`` connections to 127.0.0.1:``port`` and send ``data`` on each without
    reading: many requests in flight from one thread (long-polls, or clients that stall)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(data)
            sockets.append(sock)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def http_request(method: str, path: str, token: str, body: Any = None) -> bytes:
    """The bytes of one HTTP/1.1 request with a bearer token and an optional JSON body."""
    data = json.dumps(body).encode() if body is not None else b""
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


def read_status(sock: socket.socket, timeout: float) -> tuple[int, dict[str, str]] | None:
    """The status and headers of the response arriving on ``sock`` within ``timeout`` seconds;
    None when the server closed the connection without answering."""
    answer = read_answer(sock, timeout)
    return None if answer is None else answer[:2]
