"""The partition on the pages: the enqueue form and a schedule take one, the job page shows it,
and the jobs page filters by it (kept in the URL); a bad one is refused per field."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.web.conftest import Team, soup


def test_the_enqueue_form_takes_a_partition_and_the_job_page_shows_it(team: Team) -> None:
    person = team.person("prod")
    form = {"type": "email.send", "payload": "{}", "priority": "low", "max_retries": "3"}
    response = person.post("/ui/jobs/new", form | {"partition": "tenant-7"})
    assert response.status_code == 302
    page = soup(person.get(response.location))
    assert page.select_one("#job-partition").get_text(strip=True) == "tenant-7"
    refused = person.post("/ui/jobs/new", form | {"partition": "<b>x</b>"})
    assert refused.status_code == 422
    field = soup(refused).find(attrs={"name": "partition"})
    assert field["aria-invalid"] == "true"
    assert "A-Z a-z 0-9" in soup(refused).find(id=f"{field['id']}-error").get_text()
    assert len(team.producer.get("/jobs").get_json()["jobs"]) == 1


def test_the_jobs_page_filters_by_partition_in_the_url(team: Team) -> None:
    mine = team.producer.enqueue(partition="p1")
    other = team.producer.enqueue(partition="p2")
    person = team.person("prod")
    page = soup(person.get("/ui/jobs?partition=p1"))
    ids = {a.get_text() for a in page.select("#jobs-table tbody a")}
    assert f"#{mine['id']}" in ids and f"#{other['id']}" not in ids
    assert page.select_one("#f-partition")["value"] == "p1"
    for link in page.select("#jobs-table a[href*='sort=']"):
        assert parse_qs(urlsplit(link["href"]).query).get("partition") == ["p1"]
    sorted_page = soup(person.get("/ui/jobs?partition=p2&status=pending&sort=run_at"))
    ids = {a.get_text() for a in sorted_page.select("#jobs-table tbody a")}
    assert ids == {f"#{other['id']}"}
    bad = person.get("/ui/jobs?partition=%27%3B+DROP+TABLE+jobs")
    assert bad.status_code == 422 and "partition" in soup(bad).get_text()


def test_a_schedule_created_on_its_page_keeps_the_partition(team: Team) -> None:
    person = team.person("boss")
    form = {
        "name": "nightly",
        "cron": "0 3 * * *",
        "timezone": "UTC",
        "type": "email.send",
        "priority": "low",
        "payload": "{}",
        "catch_up": "skip",
        "enabled": "y",
        "partition": "tenant-9",
    }
    assert person.post("/ui/schedules/", form).status_code == 302
    (schedule,) = team.admin.get("/schedules").get_json()["schedules"]
    assert schedule["partition"] == "tenant-9"
    refused = person.post("/ui/schedules/", form | {"name": "other", "partition": "a b"})
    assert refused.status_code == 422
