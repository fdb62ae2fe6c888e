"""A bulk action in Debian's Chromium (Playwright): filter the jobs page, choose an action, see
the count and a sample, give a reason and confirm; a confirmation whose set changed meanwhile
is refused with the new count. The "Payload contains" filter: typed, kept in the URL, a bad
search said in the page. Each test filters on a type and priority no other test uses."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote

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


@pytest.fixture
def expected_statuses() -> list[int]:
    return [409, 422]  # the refused stale confirmation; the bad payload search typed on purpose


def waiting(people: dict[str, Any], priority: str, count: int) -> list[int]:
    """Pending webhook jobs of ``priority``, not due for an hour (no worker takes them)."""
    api = people["admin_api"]
    return [
        api.enqueue("webhook.deliver", priority=priority, delay_seconds=3600)["id"]
        for _ in range(count)
    ]


def test_filter_preview_and_confirm_a_bulk_cancel(
    watched: Page, live_site: LiveSite, people: dict[str, Any]
) -> None:
    ids = waiting(people, "high", 3)
    sign_in(watched, live_site, people["admin"], "/ui/jobs")
    watched.get_by_label("Status").select_option("pending")
    watched.get_by_label("Type").select_option("webhook.deliver")
    watched.get_by_label("Priority").select_option("high")
    filtered = "status=pending&type=webhook.deliver&priority=high"
    expect(watched).to_have_url(f"{live_site.url}/ui/jobs?{filtered}")
    bar = watched.locator("form.bulk-bar")
    bar.get_by_label("Bulk action on every matching job").select_option("cancel")
    bar.get_by_role("button", name="Preview").click()
    expect(watched).to_have_url(f"{live_site.url}/ui/jobs/bulk?{filtered}&action=cancel")
    expect(watched.get_by_role("heading", name="Bulk cancel", level=1)).to_be_visible()
    expect(watched.locator(".bulk-number")).to_have_text("3")
    sample = watched.locator(".bulk-preview tbody th a")
    expect(sample).to_have_text([f"#{job_id}" for job_id in reversed(ids)])
    watched.get_by_label("Reason").fill("the partner endpoint is gone")
    watched.get_by_role("button", name="Cancel 3 jobs").click()
    expect(watched).to_have_url(f"{live_site.url}/ui/jobs?{filtered}")
    expect(watched.locator(".flash-success")).to_contain_text("3 job(s) cancelled")
    expect(watched.locator("#jobs-table")).to_contain_text("No jobs match these filters.")
    api = people["admin_api"]
    for job_id in ids:
        last = api.get(f"/jobs/{job_id}/events").get_json()["events"][-1]
        assert (last["kind"], last["actor"]) == ("cancelled", people["admin"])
        assert re.fullmatch(r"bulk operation \d+: the partner endpoint is gone", last["note"])


def test_a_stale_preview_is_refused_with_the_new_count(
    watched: Page, live_site: LiveSite, people: dict[str, Any]
) -> None:
    waiting(people, "critical", 2)
    filtered = "status=pending&type=webhook.deliver&priority=critical"
    sign_in(watched, live_site, people["admin"], f"/ui/jobs?{filtered}")
    watched.locator("form.bulk-bar").get_by_role("button", name="Preview").click()
    expect(watched.locator(".bulk-number")).to_have_text("2")
    late = waiting(people, "critical", 1)  # the set changes before the confirmation
    watched.get_by_label("Reason").fill("duplicate deliveries")
    watched.get_by_role("button", name="Cancel 2 jobs").click()
    expect(watched.locator(".flash-error")).to_contain_text("now selects 3 job(s), not 2")
    expect(watched.locator(".bulk-number")).to_have_text("3")
    status = people["admin_api"].get(f"/jobs/{late[0]}").get_json()["status"]
    assert status == "pending"  # refused: nothing changed
    expect(watched.get_by_label("Reason")).to_have_value("duplicate deliveries")
    watched.get_by_role("button", name="Cancel 3 jobs").click()
    expect(watched.locator(".flash-success")).to_contain_text("3 job(s) cancelled")


def test_typing_a_payload_search_filters_the_jobs_and_keeps_it_in_the_url(
    watched: Page, live_site: LiveSite, people: dict[str, Any]
) -> None:
    api = people["admin_api"]
    tag = f"browser-{people['admin']}"  # no other test's jobs carry it
    wanted = [api.enqueue(payload={"tag": tag, "n": n})["id"] for n in range(2)]
    api.enqueue(payload={"tag": tag + "-other"})
    sign_in(watched, live_site, people["admin"], "/ui/jobs")
    needle = json.dumps({"tag": tag})
    watched.get_by_label("Payload contains").fill(needle)
    expect(watched).to_have_url(f"{live_site.url}/ui/jobs?payload={quote(needle, safe='')}")
    rows = watched.locator("#jobs-table tbody td[data-label=Job] a")
    expect(rows).to_have_text([f"#{job_id}" for job_id in reversed(wanted)])
    watched.get_by_label("Payload contains").fill('{"tag": ')
    expect(watched.locator("#jobs-table")).to_contain_text("payload must be a JSON object")
    watched.reload()  # the whole page, as a link to it shows it
    expect(watched.get_by_label("Payload contains")).to_have_value('{"tag": ')
    expect(watched.get_by_label("Payload contains")).to_have_attribute("aria-invalid", "true")
