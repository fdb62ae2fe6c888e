"""The job types page in Debian's Chromium, at 375 px too: pause and resume through the
confirm dialog, and the limits form, without a console error or a CSP violation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.web import test_browser
from tests.web.conftest import LiveSite
from tests.web.test_browser import sign_in

pytestmark = pytest.mark.browser
expect.set_options(timeout=15_000)
people = test_browser.people  # the browser tests' fixtures: fresh users, a watched page
watched = test_browser.watched
expected_console = test_browser.expected_console
CLEARED = {"max_running": None, "rate_limit": None, "paused": None}
CLEARED |= {"partition_max_running": None, "partition_rate_limit": None}


@pytest.fixture
def expected_statuses() -> list[int]:
    return [422]  # the limits form showing its error


@pytest.fixture
def admin_api(people: dict[str, Any]) -> Iterator[Any]:
    """The live site is shared by every browser test: its overrides go back afterwards."""
    api = people["admin_api"]
    yield api
    for job_type in ("webhook.deliver", "report.build"):
        api.client.patch(f"/types/{job_type}", json=CLEARED, headers=api.headers())


@pytest.mark.parametrize("width", [1280, 375])
def test_pause_resume_and_set_limits(
    watched: Page, live_site: LiveSite, people: dict[str, Any], admin_api: Any, width: int
) -> None:
    watched.set_viewport_size({"width": width, "height": 900})
    sign_in(watched, live_site, people["admin"], "/ui/")
    watched.get_by_role("link", name="Types", exact=True).click()
    card = watched.locator(
        "article.job-type", has=watched.get_by_role("heading", name="webhook.deliver")
    )
    card.get_by_role("button", name="Pause").click()  # hx-confirm, accepted by the fixture
    expect(watched.locator(".flash")).to_contain_text("webhook.deliver paused")
    expect(card.locator("header .badge")).to_have_text("paused")
    card.get_by_role("button", name="Resume").click()
    expect(card.locator("header .badge")).to_have_text("active")

    report = watched.locator(
        "article.job-type", has=watched.get_by_role("heading", name="report.build")
    )
    report.get_by_text("Edit limits").click()
    report.get_by_label("Rate limit", exact=True).fill("ten a minute")
    report.get_by_role("button", name="Save limits").click()
    expect(report.locator(".field-error")).to_contain_text('must be "N/second"')
    report.get_by_label("Max running", exact=True).fill("2")
    report.get_by_label("Rate limit", exact=True).fill("10/minute")
    report.get_by_label("Max running per partition").fill("1")
    report.get_by_label("Rate limit per partition").fill("3/second")
    report.get_by_role("button", name="Save limits").click()
    expect(watched.get_by_text("Limits of report.build saved.")).to_be_visible()
    expect(report.locator(".facts")).to_contain_text("2 override")
    expect(report.locator(".facts")).to_contain_text("10/minute override")
    expect(report.locator(".facts")).to_contain_text("1 override")
    expect(report.locator(".facts")).to_contain_text("3/second override")
    overflow = watched.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    assert not overflow, "the page scrolls sideways"
