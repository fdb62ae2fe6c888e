"""The caller as every layer sees it, whichever front end it came through."""

from __future__ import annotations

from dataclasses import dataclass

from app.queue.vocabulary.states import PRIORITIES, Role


@dataclass(frozen=True)
class Actor:
    """The authenticated caller: who it is, its role and its priority cap (what it may do is
    the policy's to say, ``app.queue.rules.policy``)."""

    id: int
    name: str
    role: Role
    max_priority: int = PRIORITIES["medium"]

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN
