"""Account errors: why a user, password, session or token change was refused. Each carries the
HTTP status the pages answer with; its docstring is the problem title."""

from __future__ import annotations


class AccountError(Exception):
    """The account change cannot be made."""

    status = 400

    def __init__(self, detail: str, errors: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = errors or {}

    @property
    def title(self) -> str:
        """The problem title: the first line of the class docstring."""
        return (type(self).__doc__ or "Error").strip().splitlines()[0].rstrip(".")


class InvalidAccountInput(AccountError):
    """Invalid input."""

    status = 422

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()), errors)


class WrongPasswordOrCode(AccountError):
    """Wrong password or code."""

    status = 401


class AccountForbidden(AccountError):
    """Forbidden."""

    status = 403


class AccountNotFound(AccountError):
    """Not found."""

    status = 404


class AccountConflict(AccountError):
    """Conflict with the account's current state."""

    status = 409


class FreshLoginRequired(AccountError):
    """Confirm your password first."""

    status = 403
