"""The job page lists a job's children with their statuses and links a child to its parent."""

from __future__ import annotations

from tests.web.conftest import Team, soup


def test_the_parent_lists_its_children_and_a_child_links_its_parent(team: Team) -> None:
    parent = team.producer.enqueue("report.build")
    claimed = team.worker.claim()
    assert claimed is not None
    spawned = team.worker.post(
        f"/jobs/{parent['id']}/children",
        {"attempt": claimed["attempt"], "jobs": [{"type": "email.send"}, {"type": "email.send"}]},
    ).get_json()["jobs"]
    team.producer.post(f"/jobs/{spawned[1]['id']}/cancel")
    page = soup(team.person("prod").get(f"/ui/jobs/{parent['id']}"))
    section = page.find("section", attrs={"aria-labelledby": "children-h"})
    items = section.find_all("li")
    assert [li.a["href"] for li in items] == [f"/ui/jobs/{job['id']}" for job in spawned]
    assert ["pending" in li.text and "cancelled" not in li.text for li in items] == [True, False]
    child = soup(team.person("prod").get(f"/ui/jobs/{spawned[0]['id']}"))
    assert child.find("a", href=f"/ui/jobs/{parent['id']}") is not None
    assert child.find("section", attrs={"aria-labelledby": "children-h"}) is None
    # Another producer sees neither.
    assert team.person("prod2").get(f"/ui/jobs/{parent['id']}").status_code == 404
