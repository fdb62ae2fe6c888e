"""The permission policy: the role table, the per-job rules, and clearing an action once."""

from __future__ import annotations

import pytest

from app.queue.rules.policy import (
    ROLES,
    Action,
    can,
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


def test_require_refuses_with_the_roles_name_and_clears_once() -> None:
    with pytest.raises(Forbidden, match="the worker role may not enqueue jobs"):
        require(ACTORS[Role.WORKER], Action.ENQUEUE)
    cleared = require(ACTORS[Role.PRODUCER], Action.ENQUEUE)
    assert Action.ENQUEUE in cleared.cleared and cleared == ACTORS[Role.PRODUCER]
    assert require(cleared, Action.ENQUEUE) is cleared
    assert ACTORS[Role.PRODUCER].can("enqueue") and not ACTORS[Role.PRODUCER].can("manage_users")
