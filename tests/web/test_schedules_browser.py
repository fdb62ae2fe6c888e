"""The schedules page and the job page's explanation in Debian's Chromium, at 375 px too."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.web import test_browser
from tests.web.conftest import LiveSite
from tests.web.test_browser import sign_in

pytestmark = pytest.mark.browser
expect.set_options(timeout=15_000)
_names = itertools.count(1)
people = test_browser.people  # the browser tests' fixtures: fresh users, a watched page
watched = test_browser.watched
expected_console = test_browser.expected_console


@pytest.fixture
def expected_statuses() -> list[int]:
    return []


@pytest.mark.parametrize("width", [1280, 375])
def test_create_run_and_disable_a_schedule(
    watched: Page, live_site: LiveSite, people: dict[str, Any], width: int
) -> None:
    watched.set_viewport_size({"width": width, "height": 900})
    sign_in(watched, live_site, people["admin"], "/ui/schedules/")
    name = f"browser digest {next(_names)}-{width}"
    watched.get_by_label("Name").fill(name)
    watched.get_by_label("Job type").select_option("email.send")
    watched.get_by_label("Cron expression").fill("30 8 * * 1-5")
    watched.get_by_label("Time zone").fill("America/New_York")
    watched.get_by_role("button", name="Create schedule").click()
    expect(watched.get_by_text(f"Schedule {name} created.")).to_be_visible()
    card = watched.locator("article.schedule", has=watched.get_by_role("heading", name=name))
    expect(card.locator(".next-runs li")).to_have_count(5)
    expect(card.locator(".next-runs li").first).to_contain_text("in America/New_York")
    card.get_by_role("button", name="Run now").click()  # hx-confirm, accepted by the fixture
    expect(watched.get_by_text(re.compile(r"Job \d+ enqueued\."))).to_be_visible()
    card.get_by_role("button", name="Disable").click()
    expect(card.locator(".badge")).to_have_text("disabled")
    expect(card.get_by_text("None while disabled.")).to_be_visible()
    watched.wait_for_load_state()  # the disable navigated (HX-Redirect): its stylesheets apply
    overflow = watched.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    assert not overflow, "the page scrolls sideways"


def test_the_job_page_explains_a_waiting_job(
    watched: Page, live_site: LiveSite, people: dict[str, Any]
) -> None:
    job = people["producer_api"].enqueue(run_at="2099-06-01T12:00:00Z")
    sign_in(watched, live_site, people["producer"], f"/ui/jobs/{job['id']}")
    panel = watched.locator("section.why")
    expect(panel.get_by_role("heading")).to_have_text("Why is this job not running?")
    expect(panel.locator("li.reason-scheduled")).to_contain_text("2099-06-01 12:00:00 UTC")
