"""The caller as every layer sees it, whichever front end it came through."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.queue.rules import policy
from app.queue.vocabulary.states import PRIORITIES, Role

if TYPE_CHECKING:
    from app.queue.vocabulary.jobs import Job


@dataclass(frozen=True)
class Actor:
    """The authenticated caller, whichever front end it came through."""

    id: int
    name: str
    role: Role
    max_priority: int = PRIORITIES["medium"]
    # Actions the policy already allowed during this request (see ``policy.require``).
    cleared: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN

    def can(self, action: str, job: Job | None = None) -> bool:
        """Whether the permission policy lets this actor do ``action`` (to ``job``)."""
        return policy.can(self, action, job)

    def priority_cap(self) -> int:
        """The highest priority this actor may enqueue."""
        return policy.priority_cap(self)
