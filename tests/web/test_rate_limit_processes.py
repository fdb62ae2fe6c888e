"""The failed-login limit holds across gunicorn's worker processes: the counters live in the
database, so spreading attempts over four workers does not multiply the allowance."""

from __future__ import annotations

import http.cookiejar
import re
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from devservers.servers import Gunicorn, prepare_database, running

LIMIT = 3
ATTEMPTS = 12  # four workers with per-process counters would allow 4 * LIMIT of them


def _failed_login(host: str) -> int:
    """One wrong-password login from a fresh browser session (new cookie, new CSRF token),
    on a fresh connection, so gunicorn may hand it to any worker."""
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    page = opener.open(f"http://{host}/login", timeout=60).read().decode()
    match = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page) or re.search(
        r'value="([^"]+)"[^>]*name="csrf_token"', page
    )
    assert match, "no CSRF token on the login page"
    form = urllib.parse.urlencode(
        {"username": "nobody", "password": "wrong password!", "csrf_token": match[1]}
    ).encode()
    try:
        return int(opener.open(f"http://{host}/login", data=form, timeout=60).status)
    except urllib.error.HTTPError as answer:
        answer.read()
        return int(answer.code)


@pytest.mark.slow
def test_login_limit_is_shared_by_all_workers(tmp_path: Path) -> None:
    database = prepare_database(tmp_path / "db", {})
    server = Gunicorn(database, tmp_path, workers=4, LOGIN_RATE_LIMIT=f"{LIMIT} per minute")
    with running(server):
        statuses = [_failed_login(server.host) for _ in range(ATTEMPTS)]
    print(f"\nfailed logins through gunicorn -w 4 with a limit of {LIMIT}: {statuses}")
    assert statuses == [401] * LIMIT + [429] * (ATTEMPTS - LIMIT), statuses


CONCURRENT_LIMIT = 10
CONCURRENT_ATTEMPTS = 30


@pytest.mark.slow
def test_login_limit_holds_under_concurrency(tmp_path: Path) -> None:
    """30 wrong passwords at once over four workers: the counter is incremented before the
    password check, so at most the limit of them reach it (the others get 429 unchecked)."""
    database = prepare_database(tmp_path / "db", {})
    server = Gunicorn(
        database,
        tmp_path,
        workers=4,
        LOGIN_RATE_LIMIT=f"{CONCURRENT_LIMIT} per minute",
        LOGIN_ACCOUNT_RATE_LIMIT="1000 per minute",
    )
    with running(server), ThreadPoolExecutor(CONCURRENT_ATTEMPTS) as pool:
        statuses = list(pool.map(lambda _: _failed_login(server.host), range(CONCURRENT_ATTEMPTS)))
    checked = statuses.count(401)
    print(
        f"\n{CONCURRENT_ATTEMPTS} concurrent wrong passwords, limit {CONCURRENT_LIMIT}: "
        f"{checked} checked, {statuses.count(429)} refused"
    )
    assert 1 <= checked <= CONCURRENT_LIMIT, statuses
    assert statuses.count(429) == CONCURRENT_ATTEMPTS - checked, statuses
