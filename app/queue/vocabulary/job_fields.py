"""Each per-job field's limits and default, declared once: the schema's CHECK constraints and
column sizes, the request and response models, the enqueue form and the page's hints are built
from these. A new per-job field is declared here first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Whole:
    """An integer field: ``low`` to ``high``, ``default`` when left out."""

    low: int
    high: int
    default: int

    @property
    def rule(self) -> str:
        """What a refusal says of it."""
        return f"must be an integer from {self.low} to {self.high}"

    @property
    def hint(self) -> str:
        """What a form says under it."""
        return f"{self.low} to {self.high}"

    def check(self, column: str) -> str:
        """The schema's CHECK constraint on ``column``."""
        return f"{column} BETWEEN {self.low} AND {self.high}"


@dataclass(frozen=True)
class Token:
    """A text field of 1 to ``length`` characters, each of ``characters`` (a regular
    expression's character class), which ``described`` says in words."""

    length: int
    characters: str
    described: str

    @property
    def pattern(self) -> str:
        """The whole value's regular expression."""
        return f"^{self.characters}{{1,{self.length}}}$"

    @property
    def rule(self) -> str:
        """What a refusal says of it."""
        return f"must be 1-{self.length} {self.described}"


PRINTABLE = "printable ASCII characters without spaces"

MAX_RETRIES = Whole(0, 25, default=3)
DEFAULT_PRIORITY: Final = "low"  # of ``states.PRIORITIES``; a producer's cap bounds the rest
IDEMPOTENCY_KEY = Token(255, "[!-~]", PRINTABLE)
UNIQUE_KEY = Token(200, "[!-~]", PRINTABLE)
# The partition a job is claimed fairly in (a tenant, a customer); None: the partition null.
PARTITION = Token(64, "[A-Za-z0-9._:-]", "characters of A-Z a-z 0-9 . _ : -")
# run_at and other instants as ISO 8601 text; delay_seconds, unique_for and retry_in in seconds.
TIMESTAMP_LENGTH = 64
MAX_DELAY_SECONDS = 366 * 86_400
MAX_PARENTS = 100  # depends_on
DEFAULT_ON_DEPENDENCY_FAILURE = "cancel"
# Secret payload fields: names like identifiers, and all names and values as compact JSON.
MAX_SECRETS = 16
MAX_SECRETS_BYTES = 4096
SECRET_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$"  # noqa: S105 (a pattern)
