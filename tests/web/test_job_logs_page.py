"""The job page shows a job's attempt logs, per attempt, to admins only, escaped."""

from __future__ import annotations

from typing import Any

from tests.web.conftest import Team, soup

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def _logged(team: Team) -> dict[str, Any]:
    """A job that failed an attempt after logging, and logged again on its second."""
    job = team.producer.enqueue("report.build", max_retries=1)
    for attempt, lines in ((1, ["starting", HOSTILE]), (2, ["second try"])):
        held = team.worker.claim()
        assert held is not None and held["attempt"] == attempt
        body = {"attempt": attempt, "lines": lines}
        assert team.worker.post(f"/jobs/{job['id']}/logs", body).status_code == 200
        if attempt == 1:
            item = {"id": job["id"], "attempt": 1, "outcome": "failed", "error": "x", "retry_in": 0}
            assert team.worker.post("/jobs/finish", {"results": [item]}).status_code == 200
    return job


def test_an_admin_sees_each_attempts_lines_escaped(team: Team) -> None:
    job = _logged(team)
    response = team.person("boss").get(f"/ui/jobs/{job['id']}")
    html = response.get_data(as_text=True)
    assert "<script>alert" not in html and "onerror=alert(1)>" not in html
    section = soup(response).find("section", id="job-logs")
    attempts = section.find_all("details")
    assert [d.summary.get_text(" ", strip=True) for d in attempts] == [
        "Attempt 1 2 lines",
        "Attempt 2 1 line",
    ]
    assert [d.has_attr("open") for d in attempts] == [False, True]  # the latest one open
    first = attempts[0].pre.get_text()
    assert "starting" in first and HOSTILE in first  # shown as text, not markup
    assert attempts[0].pre.find("script") is None and attempts[0].pre.find("img") is None


def test_producers_and_workers_see_no_logs_on_the_job_page(team: Team) -> None:
    job = _logged(team)
    for name in ("prod", "work"):
        response = team.person(name).get(f"/ui/jobs/{job['id']}")
        assert response.status_code == 200
        html = response.get_data(as_text=True)
        assert 'id="job-logs"' not in html and "starting" not in html and "second try" not in html


def test_an_admin_is_told_when_no_attempt_logged(team: Team) -> None:
    job = team.producer.enqueue()
    section = soup(team.person("boss").get(f"/ui/jobs/{job['id']}")).find("section", id="job-logs")
    assert "No attempt has logged a line" in section.get_text()


def test_the_polled_panel_does_not_carry_the_logs(team: Team) -> None:
    """The live refresh swaps the job panel only: the logs stay as the page loaded them, and
    the refresh reads none."""
    job = _logged(team)
    html = team.person("boss").htmx(f"/ui/jobs/{job['id']}").get_data(as_text=True)
    assert "job-logs" not in html and "second try" not in html
