"""Domain errors. Each carries the HTTP status both front ends answer with, and the refused
fields (``errors``, empty unless the input was invalid); its docstring is the problem title."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.queue.vocabulary.effects import Effects


class QueueError(Exception):
    """The request cannot be carried out."""

    status = 400
    # True when the request's transaction must still commit: the refusal reports a change the
    # server made in it (a timed-out attempt failed on its late report).
    keeps_transaction = False
    # What such a refused request's transaction did all the same, for its waiters.
    effects: Effects | None = None

    def __init__(self, detail: str, errors: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors: dict[str, str] = errors or {}

    @property
    def title(self) -> str:
        """The problem title: the first line of the class docstring."""
        return (type(self).__doc__ or "Error").strip().splitlines()[0].rstrip(".")


class InvalidInput(QueueError):
    """Invalid input."""

    status = 422

    def __init__(self, errors: dict[str, str], detail: str | None = None) -> None:
        super().__init__(detail or "; ".join(f"{k}: {v}" for k, v in errors.items()), errors)


class NotFound(QueueError):
    """Not found."""

    status = 404


class Forbidden(QueueError):
    """Forbidden."""

    status = 403


class Conflict(QueueError):
    """Conflict with the job's current state."""

    status = 409


class SecretsUnavailable(QueueError):
    """Secrets cannot be opened."""

    status = 503


class AttemptTimedOut(Conflict):
    """Conflict with the job's current state."""

    keeps_transaction = True
