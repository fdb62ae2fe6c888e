"""Who may do what: every permission rule of the API, the pages and the CLI, in one place."""

from __future__ import annotations

from enum import StrEnum

from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.errors import Forbidden
from app.queue.vocabulary.jobs import Job
from app.queue.vocabulary.states import (
    PRIORITIES,
    RETRYABLE,
    JobStatus,
    Role,
)


class Action(StrEnum):
    """Something a caller asks to do; ``ROLES`` says which roles may."""

    ENQUEUE = "enqueue"  # add jobs
    WORK = "work"  # claim, heartbeat, complete, fail, release
    SPAWN = "spawn"  # enqueue children of a job one holds, as its producer's jobs
    CANCEL = "cancel"  # stop a job (which ones: see ``can``)
    RETRY = "retry"  # put a failed or cancelled job back, its fields edited or not
    RUN_NOW = "run_now"  # make a pending job waiting for its time due at once
    VIEW_JOBS = "view_jobs"  # list and read the jobs one may see, and the dashboard
    SEE_ERRORS = "see_errors"  # read error texts (they may hold what sanitizing missed)
    READ_LOGS = "read_logs"  # read attempt logs (like error texts: what sanitizing missed)
    MANAGE_USERS = "manage_users"  # create users, change roles and caps, disable
    MANAGE_TOKENS = "manage_tokens"  # issue and revoke API tokens
    USE_ACCOUNT = "use_account"  # change one's own password, enrol a second factor
    READ_METRICS = "read_metrics"  # scrape /metrics
    READ_AUDIT = "read_audit"  # read the audit log
    VIEW_WORKERS = "view_workers"  # the workers page
    MANAGE_SCHEDULES = "manage_schedules"  # create, change, run and delete schedules
    BULK_JOBS = "bulk_jobs"  # cancel, retry or delete every job a filter selects
    MANAGE_TYPES = "manage_types"  # see job types' counts and limits, pause them, set limits
    VIEW_RETENTION = "view_retention"  # the retention settings and what the last prune removed
    VIEW_GROUPS = "view_groups"  # read a group of jobs (which ones: see ``sees_group``)
    SIGN_IN = "sign_in"  # sign in to the pages (monitors only scrape /metrics with a token)


# The monitor role reads metrics and nothing else: it is in no other row.
_PEOPLE = frozenset({Role.PRODUCER, Role.WORKER, Role.ADMIN})
_ADMIN = frozenset({Role.ADMIN})
ROLES: dict[Action, frozenset[Role]] = {
    Action.ENQUEUE: frozenset({Role.PRODUCER, Role.ADMIN}),
    Action.WORK: frozenset({Role.WORKER, Role.ADMIN}),
    Action.SPAWN: frozenset({Role.WORKER, Role.ADMIN}),
    Action.CANCEL: frozenset({Role.PRODUCER, Role.ADMIN}),
    Action.RETRY: _ADMIN,
    Action.RUN_NOW: frozenset({Role.PRODUCER, Role.ADMIN}),
    Action.VIEW_JOBS: _PEOPLE,
    Action.SEE_ERRORS: _ADMIN,
    Action.READ_LOGS: _ADMIN,
    Action.MANAGE_USERS: _ADMIN,
    Action.MANAGE_TOKENS: _ADMIN,
    Action.USE_ACCOUNT: _PEOPLE,
    Action.READ_METRICS: frozenset({Role.ADMIN, Role.MONITOR}),
    Action.READ_AUDIT: _ADMIN,
    Action.VIEW_WORKERS: _ADMIN,
    Action.MANAGE_SCHEDULES: _ADMIN,
    Action.BULK_JOBS: _ADMIN,
    Action.MANAGE_TYPES: _ADMIN,
    Action.VIEW_RETENTION: _ADMIN,
    Action.VIEW_GROUPS: _PEOPLE,
    Action.SIGN_IN: _PEOPLE,
}
# The refusal's wording: "the worker role may not enqueue jobs".
_WHAT = {
    Action.ENQUEUE: "enqueue jobs",
    Action.WORK: "claim, heartbeat, complete or fail jobs",
    Action.SPAWN: "enqueue children of jobs",
    Action.CANCEL: "cancel jobs",
    Action.RETRY: "retry jobs",
    Action.RUN_NOW: "run jobs now",
    Action.VIEW_JOBS: "view jobs",
    Action.SEE_ERRORS: "read error texts",
    Action.READ_LOGS: "read attempt logs",
    Action.MANAGE_USERS: "manage users",
    Action.MANAGE_TOKENS: "manage tokens",
    Action.USE_ACCOUNT: "use the account pages",
    Action.READ_METRICS: "read metrics",
    Action.READ_AUDIT: "read the audit log",
    Action.VIEW_WORKERS: "view workers",
    Action.MANAGE_SCHEDULES: "manage schedules",
    Action.BULK_JOBS: "run bulk actions on jobs",
    Action.MANAGE_TYPES: "manage job types",
    Action.VIEW_RETENTION: "view retention",
    Action.VIEW_GROUPS: "view groups",
    Action.SIGN_IN: "sign in to the pages; it reads /metrics with an API token",
}
# Producers stop only what has not started; admins also pull a running job from its worker.
_CANCELLABLE = {
    Role.PRODUCER: frozenset({JobStatus.PENDING}),
    Role.ADMIN: frozenset({JobStatus.PENDING, JobStatus.RUNNING}),
}


class Scope(StrEnum):
    """Which jobs an actor sees (lists, pages, ids: others' jobs answer 404)."""

    ALL = "all"  # admins
    HELD = "held"  # workers: the jobs they hold now or held in an earlier attempt
    OWNED = "owned"  # producers: the jobs they enqueued


_SCOPES = {Role.ADMIN: Scope.ALL, Role.WORKER: Scope.HELD, Role.PRODUCER: Scope.OWNED}


def scope(actor: Actor) -> Scope:
    """The jobs ``actor`` may see."""
    return _SCOPES[actor.role]


def priority_cap(actor: Actor) -> int:
    """The highest priority ``actor`` may enqueue: admins any, others their own cap."""
    return PRIORITIES["critical"] if actor.role is Role.ADMIN else actor.max_priority


def caps_priority(actor: Actor) -> bool:
    """Whether ``actor``'s priority cap limits what it enqueues: admins enqueue any priority,
    and a role that enqueues nothing has no use for one."""
    return role_allows(actor, Action.ENQUEUE) and actor.role is not Role.ADMIN


def role_allows(actor: Actor, action: Action) -> bool:
    """The role table's answer."""
    return actor.role in ROLES[action]


def require(actor: Actor, action: Action) -> None:
    """Refuse (403) an action the actor's role does not allow. The door asks it, once per
    request, before it reads a body or does any work: each route declares its action next to
    it (``app.infra.access``, ``app.api.auth``), and the CLI acts as an admin. The use cases
    behind it ask only what needs a job (``job_allows``, ``holds``, whose jobs ``scope``)."""
    if not role_allows(actor, action):
        raise Forbidden(f"the {actor.role} role may not {what(action)}")


def job_allows(actor: Actor, action: Action, job: Job) -> bool:
    """Whether an actor whose role may do ``action`` may do it to ``job``, a job it can see:
    what a role may cancel, what may be retried or run now, who may spawn children."""
    if action is Action.CANCEL:
        return job.status in _CANCELLABLE.get(actor.role, frozenset())
    if action is Action.RETRY:
        return job.status in RETRYABLE
    if action is Action.RUN_NOW:  # its owner or an admin
        owns = scope(actor) is Scope.ALL or actor.id == job.created_by
        return job.status == JobStatus.PENDING and owns
    if action is Action.SPAWN:
        return holds(actor, job)
    if action is Action.VIEW_GROUPS:  # the group of ``job``, which its producer made
        return sees_group(actor, job.created_by)
    return True


def can(actor: Actor, action: Action | str, job: Job | None = None) -> bool:
    """Whether ``actor`` may do ``action`` (to ``job``, when given): what the pages ask to
    decide which links and buttons to show."""
    action = Action(action)
    return role_allows(actor, action) and (job is None or job_allows(actor, action, job))


def sees_errors(actor: Actor) -> bool:
    """Error texts may hold what sanitizing missed: only those who may read them see them,
    in answers and on pages alike."""
    return role_allows(actor, Action.SEE_ERRORS)


def sees_group(actor: Actor, owner: int) -> bool:
    """Whether ``actor``, whose role may view groups, may see a group ``owner`` enqueued: its
    owner and admins (anyone else is answered as if it did not exist)."""
    return scope(actor) is Scope.ALL or actor.id == owner


def holds(actor: Actor, job: Job, attempt: int | None = None) -> bool:
    """Whether ``actor`` holds ``job`` now (at ``attempt``, when given): only the holder of a
    running job's current attempt may report on it or spawn its children."""
    return (
        job.status == JobStatus.RUNNING
        and job.worker_id == actor.name
        and (attempt is None or attempt == job.attempts)
    )


def still_enqueues(owner: Actor, *, disabled: bool) -> bool:
    """Whether jobs may still be enqueued in ``owner``'s name by someone else (a job's
    children, a group's callbacks): not once the account is disabled or its role no longer
    enqueues."""
    return not disabled and owner.role in ROLES[Action.ENQUEUE]


def require_producer(owner: Actor, *, disabled: bool) -> None:
    """Children belong to their parent's producer: the worker spawns them on its behalf,
    within its priority cap. A producer since disabled, or whose role no longer enqueues, gets
    no new jobs (403)."""
    if not still_enqueues(owner, disabled=disabled):
        raise Forbidden("the job's producer may no longer enqueue jobs")


def what(action: Action) -> str:
    """What ``action`` lets a role do, in words ("enqueue jobs")."""
    return _WHAT[action]
