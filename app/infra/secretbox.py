"""Secrets at rest (TOTP secrets, jobs' secret payload fields): Fernet under ``SECRETS_KEY``.

``SECRETS_KEY`` is one or more comma-separated Fernet keys (32 random bytes in urlsafe
base64, as ``Fernet.generate_key()`` makes them): the first encrypts, every one decrypts, so a
key is rotated by putting the new one first and dropping the old one once nothing needs it.
Without a key nothing can be sealed: whoever needs a secret stored says so, naming the setting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from flask import Flask, current_app
from werkzeug.exceptions import ServiceUnavailable

if TYPE_CHECKING:  # imported where used: a server without SECRETS_KEY never loads it (7 MB)
    from cryptography.fernet import MultiFernet

EXTENSION_KEY = "queuelog.secretbox"
HOW_TO_MAKE_A_KEY = (
    "python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'"
)


class SecretsKeyMissing(ServiceUnavailable):
    """No SECRETS_KEY is configured, so secrets cannot be stored or read (503: the server's
    configuration, not the request, is at fault)."""

    description = (
        "This server has no SECRETS_KEY, so it cannot store or read secrets encrypted: an "
        f"operator must set FLASK_SECRETS_KEY (make a key with {HOW_TO_MAKE_A_KEY})."
    )


class SecretUnreadable(ValueError):
    """A stored secret does not decrypt under any key of SECRETS_KEY."""


@dataclass(frozen=True)
class SecretBox:
    """Seals and opens short texts with the configured keys."""

    keys: MultiFernet

    @classmethod
    def from_setting(cls, value: str) -> SecretBox:
        """Parse ``SECRETS_KEY``; ValueError says what is wrong (never echoing a key)."""
        from cryptography.fernet import Fernet, MultiFernet

        parts = [part.strip() for part in value.split(",")]
        if not parts or any(not part for part in parts):
            raise ValueError("SECRETS_KEY must be one or more comma-separated Fernet keys")
        fernets = []
        for position, part in enumerate(parts, start=1):
            try:
                fernets.append(Fernet(part.encode()))
            except ValueError:
                raise ValueError(
                    f"SECRETS_KEY: key {position} is not a Fernet key (32 bytes in urlsafe "
                    f"base64); make one with {HOW_TO_MAKE_A_KEY}"
                ) from None
        return cls(MultiFernet(fernets))

    def seal(self, plaintext: str) -> str:
        """Encrypt (and authenticate) ``plaintext`` under the first key."""
        return self.keys.encrypt(plaintext.encode()).decode()

    def open(self, token: str) -> str:
        """Decrypt a sealed text with whichever key sealed it."""
        from cryptography.fernet import InvalidToken

        try:
            return self.keys.decrypt(token.encode()).decode()
        except InvalidToken:
            raise SecretUnreadable(
                "a stored secret does not decrypt under SECRETS_KEY: was a key removed?"
            ) from None


def init_app(app: Flask) -> None:
    """Build the box from the checked ``SECRETS_KEY`` (None: no key configured)."""
    value = app.config.get("SECRETS_KEY")
    app.extensions[EXTENSION_KEY] = SecretBox.from_setting(value) if value else None


def current_box() -> SecretBox | None:
    """The current app's box, or None when no ``SECRETS_KEY`` is configured."""
    return current_app.extensions[EXTENSION_KEY]  # type: ignore[no-any-return]


def require_box() -> SecretBox:
    """The current app's box; SecretsKeyMissing when there is none."""
    box = current_box()
    if box is None:
        raise SecretsKeyMissing()
    return box
