"""What a newcomer met on the pages, in Debian's Chromium: explanations that tell the truth,
formats that agree and messages that stay (at 375 px), and nothing cut off or scrolling sideways
(at 1280 and 375 px)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.builders import PASSWORD, Api, make_token, make_user
from tests.web import test_browser, test_types_browser
from tests.web.conftest import LiveSite, serve_site
from tests.web.test_browser import sign_in

pytestmark = pytest.mark.browser
expect.set_options(timeout=15_000)
people = test_browser.people  # the browser tests' fixtures: fresh users, a watched page
watched = test_browser.watched
expected_console = test_browser.expected_console
expected_statuses = test_browser.expected_statuses
admin_api = test_types_browser.admin_api  # type overrides go back afterwards
WIDTHS = [1280, 375]


@pytest.fixture(params=WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def width(request: pytest.FixtureRequest, watched: Page) -> int:
    """The window's width; the page is sized to it before the test opens anything."""
    watched.set_viewport_size({"width": request.param, "height": 900})
    return int(request.param)


@pytest.fixture
def phone(watched: Page) -> int:
    """The narrow window alone, for what the width does not change (the pages' HTML is the same
    at every width: a message, an error's wording, a heading): the tests of layout take both."""
    watched.set_viewport_size({"width": 375, "height": 900})
    return 375


def no_sideways_scroll(page: Page, width: int) -> None:
    """The document is no wider than the window, once the page has loaded (an action that
    navigates may have left a page whose stylesheets do not apply yet)."""
    page.wait_for_load_state()
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_the_dashboard_says_a_paused_types_jobs_are_paused(
    watched: Page, live_site: LiveSite, people: dict[str, Any], admin_api: Any, phone: int
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
    no_sideways_scroll(watched, phone)


def test_the_run_time_field_accepts_what_its_hint_shows_and_its_error_says_the_same(
    watched: Page, live_site: LiveSite, people: dict[str, Any], phone: int
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
    no_sideways_scroll(watched, phone)
    watched.get_by_label("Run at (UTC, optional)").fill("2030-01-02 15:04")
    watched.get_by_role("button", name="Enqueue").click()
    expect(watched.locator(".flash")).to_contain_text("enqueued")
    expect(watched.locator("table.fields")).to_contain_text("2030-01-02 15:04:00 UTC")


def test_a_type_limits_error_asks_for_what_a_form_can_type(
    watched: Page, live_site: LiveSite, people: dict[str, Any], admin_api: Any, phone: int
) -> None:
    sign_in(watched, live_site, people["admin"], "/ui/types/")
    card = watched.locator(
        "article.job-type", has=watched.get_by_role("heading", name="report.build")
    )
    card.get_by_text("Edit limits").click()
    card.get_by_label("Max running", exact=True).fill("0")
    card.get_by_label("Rate limit", exact=True).fill("ten a minute")
    card.get_by_role("button", name="Save limits").click()
    errors = card.locator(".field-error")
    expect(errors).to_have_count(2)
    expect(errors.first).to_have_text("must be an integer from 1 to 1,000,000")
    for text in errors.all_text_contents():
        assert "null" not in text, text
    no_sideways_scroll(watched, phone)


def test_an_actions_message_stays_while_the_job_refreshes(
    watched: Page,
    live_site: LiveSite,
    people: dict[str, Any],
    phone: int,
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
    no_sideways_scroll(watched, phone)


def test_a_cancel_replaces_the_enqueued_message(
    watched: Page, live_site: LiveSite, people: dict[str, Any], phone: int
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
    no_sideways_scroll(watched, phone)


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


ONE_LINE = """([selector, text]) => {
  const found = [];
  for (const element of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const at = node.textContent.indexOf(text);
      if (at < 0) continue;
      const range = document.createRange();
      range.setStart(node, at);
      range.setEnd(node, at + text.length);
      found.push(new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size);
    }
  }
  return found;
}"""


@pytest.fixture(scope="module")
def configured_site(
    tmp_path_factory: pytest.TempPathFactory, migrated_template: Path
) -> Iterator[LiveSite]:
    """A site of its own whose configuration limits a type as the README's example does."""
    limits = {"report.build": {"max_running": 4, "rate_limit": "100/minute"}}
    yield from serve_site(tmp_path_factory, migrated_template, JOB_TYPE_SETTINGS=limits)


def test_a_rate_limit_is_never_broken_mid_word(
    watched: Page, configured_site: LiveSite, width: int
) -> None:
    site = configured_site
    make_user(site.app, f"admin{width}", "admin", password=PASSWORD)
    admin = Api(site.api, make_token(site.app, f"admin{width}"))
    for change in ({"rate_limit": "1000/minute"}, {"max_running": 250}):
        answer = admin.client.patch("/types/report.build", json=change, headers=admin.headers())
        assert answer.status_code == 200
    sign_in(watched, site, f"admin{width}", "/ui/types/")
    expect(watched.locator("#type-1 .facts")).to_contain_text("configured: 100/minute")
    assert watched.evaluate(ONE_LINE, ["#type-1 .facts dd", "100/minute"]) == [1]
    watched.goto(site.url + "/ui/admin/audit?action=type_change")
    lines = watched.evaluate(ONE_LINE, ["table.audit td.details", "1000/minute"])
    assert lines and set(lines) == {1}, lines
    no_sideways_scroll(watched, width)


def test_the_job_pages_heading_says_something_true_of_its_status(
    watched: Page, live_site: LiveSite, people: dict[str, Any], phone: int
) -> None:
    producer, worker = people["producer_api"], people["worker_api"]
    jobs = {"pending": producer.enqueue(run_at="2099-01-01T00:00:00Z")}
    for status in ("completed", "failed", "running"):
        job = people["admin_api"].enqueue(priority="critical", max_retries=0)
        assert worker.claim()["id"] == job["id"]  # type: ignore[index]
        if status != "running":
            outcome = "complete" if status == "completed" else "fail"
            worker.post(
                f"/jobs/{job['id']}/{outcome}", {"error": "x"} if status == "failed" else {}
            )
        jobs[status] = job
    headings = {
        "pending": "Why is this job not running?",
        "running": "What is this job doing?",
        "completed": "How did this job end?",
        "failed": "How did this job end?",
    }
    sign_in(watched, live_site, people["admin"])
    for status, job in jobs.items():
        watched.goto(f"{live_site.url}/ui/jobs/{job['id']}")
        expect(watched.locator("#why-h")).to_have_text(headings[status])
    worker.post(f"/jobs/{jobs['running']['id']}/complete", {})  # the site is shared
    no_sideways_scroll(watched, phone)


def test_audit_dates_are_typed_as_utc_days(
    watched: Page, live_site: LiveSite, people: dict[str, Any], phone: int
) -> None:
    sign_in(watched, live_site, people["admin"], "/ui/admin/audit")
    since = watched.get_by_label("From (UTC)")
    assert since.get_attribute("type") in (None, "text")  # not the browser's local picker
    assert since.get_attribute("placeholder") == "YYYY-MM-DD"
    expect(watched.locator("#since-hint")).to_have_text("A UTC day, e.g. 2026-12-01")
    since.fill("12/01/2026")
    watched.get_by_role("button", name="Filter").click()
    expect(watched.locator("#since-error")).to_contain_text("like 2026-12-01")
    today = watched.evaluate("new Date().toISOString().slice(0, 10)")  # the UTC day
    watched.get_by_label("From (UTC)").fill(today)
    watched.get_by_role("button", name="Filter").click()
    expect(watched).to_have_url(re.compile(rf"/ui/admin/audit\?.*since={today}"))
    expect(watched.locator("table.audit")).to_contain_text(people["admin"])
    no_sideways_scroll(watched, phone)


def test_the_users_page_offers_a_cap_to_producers_and_says_who_signs_in(
    watched: Page, live_site: LiveSite, people: dict[str, Any], phone: int
) -> None:
    monitor = f"scraper{phone}"
    make_user(live_site.app, monitor, "monitor")
    sign_in(watched, live_site, people["admin"], "/ui/admin/users")
    expect(watched.locator("#who-signs-in")).to_contain_text(
        "roles producer, worker and admin sign in to these pages"
    )
    for name, capped in ((people["producer"], 1), (people["worker"], 0), (monitor, 0)):
        row = watched.locator("table.users tr", has=watched.get_by_role("rowheader", name=name))
        expect(row.get_by_label(f"Priority cap of {name}")).to_have_count(capped)
    row = watched.locator("table.users tr", has=watched.get_by_role("rowheader", name=monitor))
    expect(row).to_contain_text("API token only: no sign-in")
    no_sideways_scroll(watched, phone)


def test_a_new_token_names_its_user_and_copies(
    watched: Page, live_site: LiveSite, people: dict[str, Any], phone: int
) -> None:
    watched.context.grant_permissions(["clipboard-read", "clipboard-write"])
    sign_in(watched, live_site, people["admin"], "/ui/admin/tokens")
    watched.get_by_label("User", exact=True).select_option(people["worker"])
    watched.get_by_label("Label (optional)").fill("laptop")
    watched.get_by_role("button", name="Issue token").click()
    expect(watched.locator("#new-token-h")).to_have_text(
        f"New token for {people['worker']} (laptop)"
    )
    token = watched.locator("#new-token-value").input_value()
    watched.get_by_role("button", name="Copy").click()
    expect(watched.locator("#new-token-copied")).to_have_text("Copied to the clipboard.")
    assert watched.evaluate("navigator.clipboard.readText()") == token
    no_sideways_scroll(watched, phone)


def test_schedule_cards_share_the_width(
    watched: Page, live_site: LiveSite, people: dict[str, Any], width: int
) -> None:
    admin = people["admin_api"]
    body = {"name": f"one card {width}", "cron": "0 3 * * *", "type": "report.build"}
    created = admin.post("/schedules", body).get_json()
    sign_in(watched, live_site, people["admin"], "/ui/schedules/")
    grid = watched.locator(".schedule-grid").first
    reach = grid.evaluate(
        """(g) => {
          const boxes = [...g.children].map((c) => c.getBoundingClientRect());
          const row = boxes.filter((b) => Math.abs(b.top - boxes[0].top) < 1);
          return [Math.max(...row.map((b) => b.right)), g.getBoundingClientRect().right];
        }"""
    )
    assert reach[0] >= reach[1] - 1, reach  # the first row reaches across: no empty column
    admin.client.delete(f"/schedules/{created['id']}", headers=admin.headers())
    no_sideways_scroll(watched, width)


def test_a_types_counts_open_the_jobs_list_filtered(
    watched: Page, live_site: LiveSite, people: dict[str, Any], phone: int
) -> None:
    people["producer_api"].enqueue("report.build", run_at="2099-01-01T00:00:00Z")
    sign_in(watched, live_site, people["admin"], "/ui/types/")
    card = watched.locator("#type-1")
    card.get_by_role("link", name=re.compile(r"pending jobs of report\.build")).click()
    expect(watched).to_have_url(f"{live_site.url}/ui/jobs?type=report.build&status=pending")
    expect(watched.get_by_label("Type")).to_have_value("report.build")
    expect(watched.locator("#jobs-total")).to_contain_text("match")
    no_sideways_scroll(watched, phone)


ONE_ROW = """(selector) => {
  const boxes = [...document.querySelectorAll(selector)].map((e) => e.getBoundingClientRect());
  let rows = 0, bottom = -Infinity;
  for (const box of boxes) {
    if (box.top >= bottom) { rows += 1; bottom = box.bottom; }
  }
  return rows;
}"""


def test_retention_and_the_api_reference_are_in_the_navigation(
    watched: Page, live_site: LiveSite, people: dict[str, Any], width: int
) -> None:
    sign_in(watched, live_site, people["admin"])
    rows = watched.evaluate(ONE_ROW, "nav .nav-links > li")
    assert width < 576 or rows == 1, rows  # one line of links on a desktop
    watched.get_by_role("navigation", name="Main").get_by_role("link", name="Retention").click()
    expect(watched).to_have_url(f"{live_site.url}/ui/retention")
    reference = watched.get_by_role("navigation", name="Reference")
    reference.get_by_role("link", name="API reference").click()
    expect(watched).to_have_url(f"{live_site.url}/docs")
