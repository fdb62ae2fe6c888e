"""``flask --app app audit list`` and ``audit prune`` (retention, AUDIT_RETENTION, deletes too)."""

from __future__ import annotations

import json

import click
from flask.cli import AppGroup

from app.audit import queries as audit_queries
from app.audit import store as audit_store
from app.cli.pruning import prune_in_batches
from app.infra import db
from app.queue.vocabulary.errors import InvalidInput

audit_cli = AppGroup("audit", help="Read and prune the audit log.")


@audit_cli.command("list")
@click.option("--actor", default="", help="Only this actor.")
@click.option("--action", default="", help="Only this action.")
@click.option("--since", default="", help="From this ISO date or date-time (UTC).")
@click.option("--until", default="", help="Up to this ISO date (inclusive) or date-time.")
@click.option("--limit", default="50", help="At most this many events (1-200).")
@click.option("--cursor", default="", help="Older than this event id (see the last line).")
def audit_list(actor: str, action: str, since: str, until: str, limit: str, cursor: str) -> None:
    """Print audit events, newest first, one tab-separated line each."""
    args = {"actor": actor, "action": action, "since": since, "until": until}
    args |= {"limit": limit, "cursor": cursor}
    try:
        filters = audit_queries.parse_filters({k: v for k, v in args.items() if v})
    except InvalidInput as exc:
        raise click.UsageError(exc.detail) from None
    with db.read() as conn:
        page = audit_queries.audit_page(conn, filters)
    for event in page.events:
        details = json.dumps(event.details, sort_keys=True) if event.details else ""
        click.echo(
            "\t".join(
                [
                    event.at.isoformat(timespec="seconds"),
                    event.actor,
                    event.action,
                    event.target or "",
                    details,
                    event.client_address or "",
                ]
            )
        )
    if page.next_cursor:
        click.echo(f"more: --cursor {page.next_cursor}")


@audit_cli.command("prune")
@click.option("--older-than", "older_than", required=True, help="Age such as 90d or 12w.")
def audit_prune(older_than: str) -> None:
    """Delete audit events older than the given age, batch by batch."""
    total = prune_in_batches(
        older_than, lambda conn, cutoff, batch: audit_store.prune(conn, before=cutoff, batch=batch)
    )
    click.echo(f"pruned {total} audit event(s) older than {older_than}")
