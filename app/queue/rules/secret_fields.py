"""Secret payload fields: sealed before they are stored, opened only for the worker a claim
hands the job to. The box that seals them (``app.infra.secretbox``, Fernet under SECRETS_KEY) is
passed in, so the domain never reads the configuration."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Protocol

from sqlalchemy import Connection

from app.queue.sql import sealed as sealed_sql
from app.queue.vocabulary.errors import SecretsUnavailable
from app.queue.vocabulary.jobs import Job

Secrets = dict[str, str]


class Sealer(Protocol):
    """What seals and opens secrets (``app.infra.secretbox.SecretBox``)."""

    def seal(self, plaintext: str) -> str: ...

    def open(self, token: str) -> str:
        """The plaintext of ``token``; ValueError when no key opens it."""
        ...


def seal(box: Sealer, secrets: Mapping[str, str]) -> str:
    """One token holding every secret of a job (their JSON, encrypted and authenticated)."""
    return box.seal(json.dumps(dict(secrets), separators=(",", ":")))


def unsealed(box: Sealer, token: str) -> Secrets:
    """The secrets a ``seal`` token holds."""
    opened: Secrets = json.loads(box.open(token))
    return opened


def for_holder(
    conn: Connection, claimed: Sequence[Job], worker: str, box: Sealer | None
) -> dict[int, Secrets]:
    """The secrets of the jobs ``worker`` just claimed, opened, by job id (one read for all;
    none for jobs without secrets). A job whose secrets were erased (an admin retried it
    after it finished) gets ``{}``. SecretsUnavailable (503) when a job has secrets that no
    key opens: the caller's transaction then rolls the claim back, and the operator must put
    the key that sealed them back into SECRETS_KEY."""
    named = [job.id for job in claimed if job.secret_names]
    if not named:
        return {}
    tokens = sealed_sql.sealed_secrets(conn, named, worker)
    try:
        opened = {job_id: unsealed(_needed(box), token) for job_id, token in tokens.items()}
    except ValueError:
        raise SecretsUnavailable(
            "a claimed job's secrets do not open under SECRETS_KEY: set FLASK_SECRETS_KEY to "
            "a list that holds the key they were sealed with"
        ) from None
    return {job_id: opened.get(job_id, {}) for job_id in named}


def _needed(box: Sealer | None) -> Sealer:
    if box is None:
        raise ValueError("no SECRETS_KEY")
    return box
