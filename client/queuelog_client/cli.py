"""``queuelog-worker MODULE:HANDLERS --url URL``: run a Worker from the command line."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from queuelog_client.client import Client
from queuelog_client.errors import QueuelogError
from queuelog_client.worker import Worker

TOKEN_VARIABLE = "QUEUELOG_TOKEN"  # noqa: S105 (the name of a variable, not a secret)


def parser() -> argparse.ArgumentParser:
    """The command line's arguments."""
    p = argparse.ArgumentParser(
        prog="queuelog-worker",
        description="Claim queuelog jobs and run them with the handlers of a Python module. "
        f"The API token is read from the environment variable {TOKEN_VARIABLE}.",
    )
    p.add_argument("handlers", metavar="MODULE:HANDLERS", help="a dict {type: fn} in a module")
    p.add_argument("--url", required=True, help="the queuelog server, e.g. http://127.0.0.1:5000")
    p.add_argument("--concurrency", type=int, default=8, help="handlers run at once (8)")
    p.add_argument("--types", help="comma-separated job types to claim (default: every handler)")
    p.add_argument("--grace", type=float, default=30.0, help="seconds to let handlers finish (30)")
    return p


def load_handlers(spec: str) -> Mapping[str, Any]:
    """The ``{type: fn}`` dict named by ``MODULE:ATTRIBUTE`` (imported from the current
    directory too, like gunicorn's ``wsgi:app``)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"{spec!r} is not MODULE:HANDLERS")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    handlers = getattr(importlib.import_module(module_name), attribute, None)
    if not isinstance(handlers, Mapping) or not all(callable(fn) for fn in handlers.values()):
        raise ValueError(f"{spec} must be a dict of job type -> handler function")
    return handlers


def main(argv: Sequence[str] | None = None) -> int:
    """Run the worker until SIGTERM/SIGINT; 0 when every claimed job was accounted for."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    p = parser()
    if any(arg == "--token" or arg.startswith("--token=") for arg in args_list):
        p.error(f"there is no --token option: set {TOKEN_VARIABLE} (command lines are visible)")
    args = p.parse_args(args_list)
    token = os.environ.get(TOKEN_VARIABLE, "")
    if not token:
        p.error(f"set {TOKEN_VARIABLE} to a worker's API token (flask --app app token create)")
    if args.concurrency < 1:
        p.error("--concurrency must be at least 1")
    try:
        handlers = load_handlers(args.handlers)
    except (ImportError, ValueError) as exc:
        p.error(str(exc))
    types = [t.strip() for t in args.types.split(",") if t.strip()] if args.types else None
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per job, not per request
    with Client(args.url, token) as client:
        try:
            worker = Worker(client, handlers, args.concurrency, types, grace=args.grace)
        except ValueError as exc:
            p.error(str(exc))
        try:
            worker.run()
        except QueuelogError:
            return 1
    if worker.abandoned:
        logging.shutdown()
        os._exit(1)  # handler threads still run; their leases bring the jobs back
    return 1 if worker.unreported else 0


if __name__ == "__main__":
    sys.exit(main())
