"""Attempt logs on the job page in Debian's Chromium, at 1280 and 375 px: an admin opens each
attempt's lines (markup shown as text), a producer sees no logs, and nothing scrolls sideways."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.web import test_browser
from tests.web.conftest import LiveSite
from tests.web.test_browser import UNREACHABLE, sign_in

pytestmark = pytest.mark.browser
expect.set_options(timeout=15_000)
people = test_browser.people  # the browser tests' fixtures: fresh users, a watched page
watched = test_browser.watched
expected_statuses = test_browser.expected_statuses
expected_console = test_browser.expected_console
HOSTILE = '<img src=x onerror="document.title=1">'


def _logged_job(people: dict[str, Any]) -> dict[str, Any]:
    """A running job whose attempt logged a few lines, one of them long and one hostile."""
    worker = people["worker_api"]
    job = people["producer_api"].enqueue(payload={"rows": 3})
    # The site is shared: claim until this job comes, then let go of others' leftovers (let go
    # at once, the oldest of them would be claimed again and again).
    leftovers = []
    while (held := worker.claim()) is not None and held["id"] != job["id"]:
        leftovers.append(held)
    for other in leftovers:
        worker.post(f"/jobs/{other['id']}/release", {"attempt": other["attempt"]})
    assert held is not None
    lines = ["connecting", HOSTILE, "row " + "x" * 400, "done: 3 rows"]
    body = {"attempt": held["attempt"], "lines": lines}
    assert worker.post(f"/jobs/{job['id']}/logs", body).status_code == 200
    return job


@pytest.mark.parametrize("width", [1280, 375])
def test_an_admin_reads_the_logs_and_a_producer_does_not(
    watched: Page, live_site: LiveSite, people: dict[str, Any], width: int
) -> None:
    job = _logged_job(people)
    watched.set_viewport_size({"width": width, "height": 900})
    sign_in(watched, live_site, people["admin"], f"/ui/jobs/{job['id']}")
    logs = watched.locator("#job-logs")
    attempt = logs.locator("details").first
    expect(attempt.locator("summary")).to_contain_text("Attempt 1")
    expect(attempt.locator("pre")).to_contain_text(HOSTILE)  # text, not an element
    assert watched.locator("#job-logs img").count() == 0
    attempt.locator("summary").click()  # collapses, and opens again
    expect(attempt.locator("pre")).to_be_hidden()
    attempt.locator("summary").click()
    expect(attempt.locator("pre")).to_contain_text("done: 3 rows")
    assert watched.evaluate("document.documentElement.scrollWidth") <= width
    assert watched.evaluate(UNREACHABLE) == []

    watched.goto("about:blank")  # the admin's page polls: no poll may go out signed out
    watched.context.clear_cookies()
    sign_in(watched, live_site, people["producer"], f"/ui/jobs/{job['id']}")
    expect(watched.locator("#job-detail")).to_be_visible()
    expect(watched.locator("#job-logs")).to_have_count(0)
