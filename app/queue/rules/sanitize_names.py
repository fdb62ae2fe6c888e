"""Which names hold secrets (``DB_PASSWORD``, ``apiKey``, ``sig``) and which values say nothing."""

from __future__ import annotations

import re
import string
from collections.abc import Iterator
from functools import lru_cache

from detect_secrets.plugins.keyword import DENYLIST

# detect-secrets' keyword list (password, passwd, pwd, secret, api_?key, private_?key, ...)
# anywhere in a name, and the words it leaves out.
_STRONG = re.compile(
    "|".join(
        (
            *DENYLIST,
            r"passphrase|passcode|credential|access_?key|shared_?access|signing_?key",
            r"encryption_?key|master_?key|access_?token|refresh_?token|auth_?token",
        )
    )
)
# A name ending in one of these words holds a secret: db_pass, GH_TOKEN, x-api-key, sig.
_LAST_WORDS = frozenset(
    {"token", "key", "pass", "pwd", "pw", "sig", "signature", "auth", "authorization", "cookie"}
)
# Unless the word before says what kind of (non-secret) key or token it is.
_HARMLESS_QUALIFIERS = frozenset(
    {
        "unique", "idempotency", "sort", "primary", "foreign", "cache", "partition", "routing",
        "public", "object", "s3", "row", "hash", "range", "dedup", "lookup", "map", "dict",
        "group", "shard", "index", "sequence", "natural", "composite", "translation", "message",
        "cursor", "page", "next", "continuation", "pagination", "sync", "resume", "field",
        "column", "label", "by", "bypass", "compass", "surpass", "max", "num", "total",
    }
)  # fmt: skip
# ... or a last word saying the value is about the secret, not the secret: a file, a length.
_HARMLESS_LAST_WORDS = frozenset(
    {
        "file", "path", "dir", "stdin", "env", "fd", "prompt", "cmd", "command", "helper",
        "length", "len", "policy", "count", "type", "name", "expiry", "expires", "expiration",
        "ttl", "algorithm", "format", "version", "enabled", "required", "error", "errors",
        "kind", "mode", "store", "manager", "provider", "backend", "pattern", "regex",
    }
)  # fmt: skip
# Words of a name: "dbPassword" -> db, password; "X-Api-Key" -> x, api, key.
_WORDS = re.compile(r"[A-Z]{2,}(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# A shell's working directory, not a password.
_DIRECTORY_NAMES = frozenset({"pwd", "oldpwd"})


# What every secret name and every tool flag of sanitize_notations holds, in lower case.
HINTS = re.compile(
    r"pass|pw|secret|token|key|auth|sig|cookie|sess|cred|contrase|mysql|maria|mycli|login"
    r"|twine|mongo|redis|ldap|sqlcmd|bcp|isql|-u|--user|--proxy|identified|machine|default"
)
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def lines_with(text: str, pattern: re.Pattern[str]) -> Iterator[tuple[int, int]]:
    """The stretches of whole lines of ``text`` in which ``pattern`` (lower case) occurs.

    Most lines of an error name no secret: the notations are read on the others only."""
    lowered = text.lower() if text.isascii() else text.translate(_ASCII_LOWER)
    position = 0
    stretch: tuple[int, int] | None = None
    while (hit := pattern.search(lowered, position)) is not None:
        line_start = text.rfind("\n", 0, hit.start()) + 1
        line_end = text.find("\n", hit.end())
        line_end = len(text) if line_end == -1 else line_end
        if stretch is not None and line_start <= stretch[1] + 1:
            stretch = (stretch[0], line_end)
        else:
            if stretch is not None:
                yield stretch
            stretch = (line_start, line_end)
        position = line_end + 1
    if stretch is not None:
        yield stretch


@lru_cache(maxsize=1024)
def is_secret_name(name: str) -> bool:
    """Whether a value named ``name`` (a variable, key, header, flag or attribute) is a secret."""
    words = [word.lower() for word in _WORDS.findall(name)]
    while words and words[-1].isdigit():  # X-Hub-Signature-256, password2
        words.pop()
    if not words or words[-1] in _HARMLESS_LAST_WORDS:
        return False
    if _STRONG.search("_".join(words)) or _STRONG.search(name.lower()):
        return True
    last = words[-1]
    if last in _LAST_WORDS or any(
        last.endswith(end) for end in ("pass", "token", "sessid", "sessionid")
    ):
        before = words[-2] if len(words) > 1 else ""
        return (
            before not in _HARMLESS_QUALIFIERS
            and last not in _HARMLESS_QUALIFIERS
            and (last != "key" or bool(before))
        )
    return False


def is_password_name(name: str) -> bool:
    """Names that stand before a quoted password in SQL and prose (``PASSWORD 'x'``)."""
    words = _WORDS.findall(name)
    return bool(words) and words[-1].lower() in ("password", "passwd", "passphrase", "pwd")


def is_directory_name(name: str) -> bool:
    """``PWD`` and ``OLDPWD`` name the shell's working directories."""
    return name.lower() in _DIRECTORY_NAMES


@lru_cache(maxsize=1024)
def is_authorization_name(name: str) -> bool:
    """Authorization and cookie headers: their value runs to the end of the line."""
    return name.lower().replace("-", "").replace("_", "").endswith(("authorization", "cookie"))


_PLACEHOLDER = re.compile(
    r"(?i)none|null|nil|true|false|yes|no|undefined|empty|\?|%s|\*+|x{3,}|•+|\[redacted\]|\[path\]"
    r"|<[a-z _-]{1,32}>|\$\{?\w{1,64}\}?|%\(\w{1,64}\)s|\{\{[^}]{0,64}\}\}|:\w{1,64}"
)
_CLOSING = re.compile(r"[),;.\]}]{0,8}")


def is_placeholder(value: str) -> bool:
    """Values that reveal nothing: ``None``, ``***``, ``${DB_PASSWORD}``, ``%s``, ``[REDACTED]``."""
    bare = value.strip("\"'`\\")
    if bare == "":
        return True
    word = _PLACEHOLDER.match(bare)
    return word is not None and _CLOSING.fullmatch(bare, word.end()) is not None
