"""The permission policy: the role table, the per-job rules, and the door's refusal."""

from __future__ import annotations

import pytest

from app.queue.rules.policy import (
    ROLES,
    Action,
    can,
    job_allows,
    require,
)
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.errors import Forbidden
from app.queue.vocabulary.states import JobStatus, Role
from tests.builders import job_value

ACTORS = {role: Actor(id=1, name=str(role), role=role) for role in Role}


def test_every_action_has_roles_and_admins_may_do_everything() -> None:
    assert set(ROLES) == set(Action)
    assert all(Role.ADMIN in roles for roles in ROLES.values())


@pytest.mark.parametrize("status", list(JobStatus))
def test_cancel_and_retry_depend_on_the_jobs_status(status: JobStatus) -> None:
    job = job_value(status=status)
    assert can(ACTORS[Role.PRODUCER], "cancel", job) is (status == JobStatus.PENDING)
    assert can(ACTORS[Role.ADMIN], "cancel", job) is (status in ("pending", "running"))
    assert can(ACTORS[Role.WORKER], "cancel", job) is False
    assert can(ACTORS[Role.ADMIN], "retry", job) is (status in ("failed", "cancelled"))
    assert can(ACTORS[Role.PRODUCER], "retry", job) is False


def test_require_refuses_with_the_roles_name() -> None:
    with pytest.raises(Forbidden, match="the worker role may not enqueue jobs"):
        require(ACTORS[Role.WORKER], Action.ENQUEUE)
    require(ACTORS[Role.PRODUCER], Action.ENQUEUE)
    assert can(ACTORS[Role.PRODUCER], "enqueue") and not can(ACTORS[Role.PRODUCER], "manage_users")


@pytest.mark.parametrize("status", list(JobStatus))
def test_the_jobs_rules_do_not_ask_the_role_table_again(status: JobStatus) -> None:
    """What ``job_allows`` answers is the job's part; ``can`` is the role's and the job's."""
    job = job_value(status=status)
    for role, actor in ACTORS.items():
        for action in (Action.CANCEL, Action.RETRY):
            expected = role in ROLES[action] and job_allows(actor, action, job)
            assert can(actor, action, job) is expected
