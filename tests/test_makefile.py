"""`make run` as a newcomer types it in a fresh checkout: it installs the app and the client and
none of the test, lint or benchmark tools, prints no warning while it does, serves on the port
given on the command line, and the printed password signs in through the login form."""

from __future__ import annotations

import http.cookiejar
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import tomllib
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from devservers.servers import REPO, free_port
from tests.test_packaging import PACKAGING_WARNING

pytestmark = pytest.mark.slow  # a fresh venv: pip installs the app's dependencies

INSTALL_TIMEOUT = 900  # seconds: pip on a slow registry mirror, two busy cores


def _checkout(tmp_path: Path) -> Path:
    """A copy of this checkout's files as a clone has them (links kept), without its venv."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    checkout = tmp_path / "queuelog"
    for name in filter(None, listed.split("\0")):
        source, target = REPO / name, checkout / name
        if not source.is_symlink() and not source.is_file():
            continue  # deleted in the working tree, or a submodule
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    return checkout


def _tools() -> set[str]:
    """The distributions the test, lint and bench extras name (the ones `make run` skips)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    pinned = (r for name in ("test", "lint", "bench") for r in extras[name])
    names = {_normal(re.split(r"[=<>\[; ]", requirement, maxsplit=1)[0]) for requirement in pinned}
    return names - {project["name"]}  # an extra may include the others: queuelog[test]


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _sign_in(port: int, password: str) -> str:
    """Sign in as ``admin`` through the login form (its CSRF token included); the page
    reached."""
    base = f"http://127.0.0.1:{port}"
    browser = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    with browser.open(f"http://127.0.0.1:{port}/login", timeout=10) as page:
        form = page.read().decode()
    token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', form)
    assert token, form
    body = {"username": "admin", "password": password, "csrf_token": token.group(1)}
    data = urllib.parse.urlencode(body).encode()
    login = f"http://127.0.0.1:{port}/login"
    request = urllib.request.Request(login, data=data, headers={"Origin": base})
    with browser.open(request, timeout=10) as signed_in:
        assert signed_in.geturl() == f"{base}/ui/"
        return signed_in.read().decode()


def _wait_until_served(make: subprocess.Popen[str], port: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                assert r.status == 200
                return
        except OSError:
            assert make.poll() is None, "make run exited"
            assert time.monotonic() < deadline, f"nothing answers on port {port}"
            time.sleep(0.2)


def test_make_run_in_a_fresh_checkout_installs_the_app_alone_and_signs_in(
    tmp_path: Path,
) -> None:
    checkout, port = _checkout(tmp_path), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLASK_", "QUEUELOG_"))}
    env.pop("VIRTUAL_ENV", None)
    with subprocess.Popen(
        ["make", "run", f"PORT={port}"],
        cwd=checkout,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # make, pip, flask and the server share a group to stop
    ) as make:
        stop = threading.Timer(INSTALL_TIMEOUT, os.killpg, (make.pid, signal.SIGKILL))
        stop.start()
        try:
            assert make.stdout is not None
            lines = []
            for line in make.stdout:  # up to the first-run message's last line
                lines.append(line)
                if "password:" in line:
                    break
            printed = "".join(lines)
            assert "password:" in printed, printed[-3000:]
            assert not PACKAGING_WARNING.search(printed), printed
            assert f"Log in at http://127.0.0.1:{port}/login" in printed
            _wait_until_served(make, port)
            page = _sign_in(port, printed.split("password:")[1].split()[0])
            assert 'action="/logout"' in page  # the sign-out form: signed in
        finally:
            stop.cancel()
            os.killpg(make.pid, signal.SIGTERM)
            make.wait(timeout=30)
    listed = subprocess.run(
        [str(checkout / ".venv" / "bin" / "pip"), "list", "--format=freeze"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    installed = {_normal(line.split("==")[0]) for line in listed.split()}
    assert {"flask", "granian", "httpx", "queuelog", "queuelog-client"} <= installed
    assert not installed & _tools(), installed & _tools()
