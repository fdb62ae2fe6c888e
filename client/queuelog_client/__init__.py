"""queuelog-client: a Python client for queuelog's JSON API and a worker runner."""

from queuelog_client.client import Client
from queuelog_client.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    NotFound,
    QueuelogError,
    RateLimited,
    ServerError,
    Unauthorized,
    Unprocessable,
    Unreachable,
)
from queuelog_client.handlers import Fail, JobContext, Retry
from queuelog_client.models import Event, Job, JobType, Schedule
from queuelog_client.worker import Worker

__all__ = [
    "BadRequest",
    "Client",
    "Conflict",
    "Event",
    "Fail",
    "Forbidden",
    "Job",
    "JobContext",
    "JobType",
    "NotFound",
    "QueuelogError",
    "RateLimited",
    "Retry",
    "Schedule",
    "ServerError",
    "Unauthorized",
    "Unprocessable",
    "Unreachable",
    "Worker",
]
