"""The user record and the token record as the rest of the app sees them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.queue.rules.policy import priority_cap
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.states import Role, priority_label


@dataclass(frozen=True)
class User:
    """One row of ``users`` (the password hash stays in the store)."""

    id: int
    name: str
    role: str
    max_priority: int
    disabled: bool
    session_nonce: str
    created_at: datetime

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> User:
        """Build a user from a ``users`` row mapping."""
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})

    def actor(self) -> Actor:
        """The identity the job service checks roles and ownership against."""
        return Actor(
            id=self.id, name=self.name, role=Role(self.role), max_priority=self.max_priority
        )

    @property
    def max_priority_label(self) -> str:
        """The cap enqueue enforces (``Actor.priority_cap``): an admin's is ``critical`` whatever
        was stored, so a list or a form never shows a cap that is not the one applied."""
        return priority_label(priority_cap(self.actor()))


@dataclass(frozen=True)
class ApiToken:
    """One row of ``api_tokens`` (never the token itself: only its hash is stored)."""

    id: int
    user_id: int
    label: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    expires_at: datetime | None

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> ApiToken:
        """Build a token record from an ``api_tokens`` row mapping."""
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})

    def state(self, now: datetime) -> str:
        """``active``, ``expired`` or ``revoked``, for people reading a token list."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"
