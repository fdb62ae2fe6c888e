"""Issue 12 finding 1: a chunked body over MAX_CONTENT_LENGTH is refused whole (413), on the
API and on the pages, through a real gunicorn that de-chunks the input, and nothing is stored."""

from __future__ import annotations

import http.cookiejar
import json
import re
import socket
import sqlite3
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from app.config import DEFAULTS
from app.infra import db
from devservers.servers import Gunicorn, Served, app_settings, prepare_database, running
from tests.builders import make_user

LIMIT = int(DEFAULTS["MAX_CONTENT_LENGTH"])
PASSWORD = "correct horse battery staple"


def _chunked_post(host: str, path: str, body: bytes, headers: dict[str, str]) -> int:
    """POST ``body`` in 64 KiB chunks over a plain socket; the status line's code."""
    address, _, port = host.partition(":")
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    with socket.create_connection((address, int(port)), timeout=20) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\n"
            f"Connection: close\r\n{head}\r\n".encode()
        )
        try:
            for start in range(0, len(body), 65_536):
                chunk = body[start : start + 65_536]
                sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered before reading everything: its answer is still there
        answer = sock.makefile("rb").readline()
    return int(answer.split()[1])


def _padded_json(size: int) -> bytes:
    """A valid enqueue body of ``size`` bytes (whitespace after the object pads it)."""
    body = json.dumps({"type": "email.send", "payload": {"n": 1}}).encode()
    return body + b" " * (size - len(body))


def _jobs(database_path: Path) -> int:
    with sqlite3.connect(database_path) as conn:
        return int(conn.execute("select count(*) from jobs").fetchone()[0])


def _signed_in(host: str) -> tuple[str, str]:
    """A signed-in session: its cookie header and the enqueue form's CSRF token."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))

    def token(path: str) -> str:
        page = opener.open(f"http://{host}{path}", timeout=20).read().decode()
        match = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page)
        assert match, f"no CSRF token on {path}"
        return match[1]

    form = {"username": "alice", "password": PASSWORD, "csrf_token": token("/login")}
    opener.open(f"http://{host}/login", data=urllib.parse.urlencode(form).encode(), timeout=20)
    csrf = token("/ui/jobs/new")
    return "; ".join(f"{c.name}={c.value}" for c in jar), csrf


@pytest.mark.slow
@pytest.mark.parametrize("server_class", [Served, Gunicorn])  # make serve's, and plain gunicorn
def test_chunked_body_over_limit_is_413(tmp_path: Path, server_class: type[Served]) -> None:
    database = prepare_database(tmp_path / "db", {"producer": "producer"})
    from app import create_app

    app = create_app(app_settings(database))
    make_user(app, "alice", "producer", password=PASSWORD)
    db.close(app)
    token = database.tokens["producer"]
    api = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    with running(server_class(database, tmp_path, workers=2)) as server:
        # Under the limit, chunked is fine; over it by a little or a lot, it is refused whole.
        assert _chunked_post(server.host, "/jobs", _padded_json(LIMIT // 2), api) == 201
        for size in (LIMIT + 1, LIMIT + 256 * 1024):
            assert _chunked_post(server.host, "/jobs", _padded_json(size), api) == 413
        assert _chunked_post(server.host, "/jobs/claim", _padded_json(LIMIT + 1), api) == 413
        cookie, csrf = _signed_in(server.host)
        form = urllib.parse.urlencode(
            {"csrf_token": csrf, "type": "email.send", "priority": "low", "max_retries": "3"}
        ).encode()
        page = {"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"}
        assert _chunked_post(server.host, "/ui/jobs/new", form, page) == 302
        padded = form + b"&payload=" + b"+" * (LIMIT + 256 * 1024)
        assert _chunked_post(server.host, "/ui/jobs/new", padded, page) == 413
    # Two jobs: the chunked ones under the limit; none of the refused ones.
    assert _jobs(database.path) == 2
