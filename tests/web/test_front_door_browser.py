"""What a newcomer met on the pages, in Debian's Chromium at 1280 and 375 px: explanations that
tell the truth, formats that agree, messages that stay, and nothing cut off or scrolling
sideways."""

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
expected_statuses = test_browser.expected_statuses
WIDTHS = [1280, 375]
CLEARED = {"max_running": None, "rate_limit": None, "paused": None}


@pytest.fixture(params=WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def width(request: pytest.FixtureRequest, watched: Page) -> int:
    """The window's width; the page is sized to it before the test opens anything."""
    watched.set_viewport_size({"width": request.param, "height": 900})
    return int(request.param)


@pytest.fixture
def admin_api(people: dict[str, Any]) -> Iterator[Any]:
    """The live site is shared by every browser test: type overrides go back afterwards."""
    api = people["admin_api"]
    yield api
    for job_type in ("webhook.deliver", "report.build"):
        api.client.patch(f"/types/{job_type}", json=CLEARED, headers=api.headers())


def no_sideways_scroll(page: Page, width: int) -> None:
    """The document is no wider than the window."""
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_the_dashboard_says_a_paused_types_jobs_are_paused(
    watched: Page, live_site: LiveSite, people: dict[str, Any], admin_api: Any, width: int
) -> None:
    for _ in range(2):
        people["producer_api"].enqueue("webhook.deliver")
    paused = admin_api.client.patch(
        "/types/webhook.deliver", json={"paused": True}, headers=admin_api.headers()
    )
    assert paused.status_code == 200
    sign_in(watched, live_site, people["producer"])
    why = watched.locator("#not-due")
    expect(why).to_contain_text("2 are of a paused type (webhook.deliver)")
    expect(why).not_to_contain_text("run time")
    expect(watched.locator("main")).not_to_contain_text("None due yet")
    no_sideways_scroll(watched, width)


def test_the_run_time_field_accepts_what_its_hint_shows_and_its_error_says_the_same(
    watched: Page, live_site: LiveSite, people: dict[str, Any], width: int
) -> None:
    sign_in(watched, live_site, people["producer"], "/ui/jobs/new")
    hint = watched.locator("#run_at-hint")
    expect(hint).to_contain_text("2030-01-02 15:04")
    run_at = watched.get_by_label("Run at (UTC, optional)")
    run_at.fill("next tuesday")
    watched.get_by_role("button", name="Enqueue").click()
    error = watched.locator("#run_at-error")
    expect(error).to_have_text("must be a 24-hour UTC time like 2030-01-02 15:04")
    expect(watched.locator("main")).not_to_contain_text("ISO 8601")
    no_sideways_scroll(watched, width)
    watched.get_by_label("Run at (UTC, optional)").fill("2030-01-02 15:04")
    watched.get_by_role("button", name="Enqueue").click()
    expect(watched.locator(".flash")).to_contain_text("enqueued")
    expect(watched.locator("table.fields")).to_contain_text("2030-01-02 15:04:00 UTC")


def test_a_type_limits_error_asks_for_what_a_form_can_type(
    watched: Page, live_site: LiveSite, people: dict[str, Any], admin_api: Any, width: int
) -> None:
    sign_in(watched, live_site, people["admin"], "/ui/types/")
    card = watched.locator(
        "article.job-type", has=watched.get_by_role("heading", name="report.build")
    )
    card.get_by_text("Edit limits").click()
    card.get_by_label("Max running").fill("0")
    card.get_by_label("Rate limit").fill("ten a minute")
    card.get_by_role("button", name="Save limits").click()
    errors = card.locator(".field-error")
    expect(errors).to_have_count(2)
    expect(errors.first).to_have_text("must be an integer from 1 to 1,000,000")
    for text in errors.all_text_contents():
        assert "null" not in text, text
    no_sideways_scroll(watched, width)


def test_an_actions_message_stays_while_the_job_refreshes(
    watched: Page,
    live_site: LiveSite,
    people: dict[str, Any],
    width: int,
    request: pytest.FixtureRequest,
) -> None:
    worker, admin = people["worker_api"], people["admin_api"]
    job = admin.enqueue(max_retries=0, priority="critical")  # claimed before older ones
    assert worker.claim()["id"] == job["id"]  # type: ignore[index]
    worker.post(f"/jobs/{job['id']}/fail", {"error": "disk full"})
    request.addfinalizer(lambda: admin.post(f"/jobs/{job['id']}/cancel"))  # the site is shared
    sign_in(watched, live_site, people["admin"], f"/ui/jobs/{job['id']}")
    watched.get_by_role("button", name="Retry job").click()
    message = watched.locator("#flashes .flash")
    expect(message).to_have_text(f"Job {job['id']} is queued again.")
    for _ in range(2):  # the pending job's page refreshes every second; the message stays
        with watched.expect_response(lambda r: r.url.endswith(f"/ui/jobs/{job['id']}")):
            pass
        expect(message).to_have_text(f"Job {job['id']} is queued again.")
    no_sideways_scroll(watched, width)


def test_a_cancel_replaces_the_enqueued_message(
    watched: Page, live_site: LiveSite, people: dict[str, Any], width: int
) -> None:
    sign_in(watched, live_site, people["producer"], "/ui/jobs/new")
    watched.get_by_label("Run at (UTC, optional)").fill("2099-01-01 00:00")
    watched.get_by_role("button", name="Enqueue").click()
    messages = watched.locator("#flashes .flash")
    expect(messages).to_contain_text("enqueued")
    watched.get_by_role("button", name="Cancel job").click()
    expect(messages).to_have_count(1)
    expect(messages).to_contain_text("cancelled")
    expect(watched.locator(".job-status .badge")).to_have_text("cancelled")
    no_sideways_scroll(watched, width)


PLACEHOLDER_FITS = """(input) => {
  const style = getComputedStyle(input);
  const context = document.createElement('canvas').getContext('2d');
  context.font = style.font;
  const text = context.measureText(input.placeholder).width;
  const room = input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  return [text, room];
}"""
CLIPPED_CELLS = """() => [...document.querySelectorAll('table.fields td, table.fields th')]
  .filter((cell) => cell.scrollWidth > cell.clientWidth + 1
                    || cell.getBoundingClientRect().right > window.innerWidth + 0.5)
  .map((cell) => cell.textContent.trim())"""


def test_a_job_with_a_clients_automatic_key_fits_the_page(
    watched: Page, live_site: LiveSite, people: dict[str, Any], width: int
) -> None:
    key = "qlc-" + "0123456789abcdef" * 2 + "01234"  # 37 characters, as the client makes them
    job = people["producer_api"].enqueue(idempotency_key=key)
    sign_in(watched, live_site, people["producer"], f"/ui/jobs/{job['id']}")
    expect(watched.locator("table.fields")).to_contain_text(key)
    no_sideways_scroll(watched, width)
    assert watched.evaluate(CLIPPED_CELLS) == []
    scroller = watched.locator("table.fields").locator("xpath=..")
    assert scroller.evaluate("(box) => box.scrollWidth <= box.clientWidth")


def test_the_search_placeholder_is_not_cut(
    watched: Page, live_site: LiveSite, people: dict[str, Any], width: int
) -> None:
    sign_in(watched, live_site, people["producer"], "/ui/jobs")
    text, room = watched.get_by_label("Search").evaluate(PLACEHOLDER_FITS)
    assert text <= room, (text, room)
    no_sideways_scroll(watched, width)
