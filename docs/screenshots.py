"""Take the README's screenshots: ``.venv/bin/python docs/screenshots.py [NAME ...]``
(all of them, or only the named ones, e.g. ``schedules job-explained``).

Serves the app on 127.0.0.1 with a throwaway database and sample jobs, then drives Debian's
Chromium through Playwright, like the browser tests. Writes docs/*.png (desktop and 375 px);
name pages (``dashboard jobs jobs-search job enqueue workers audit bulk schedules job-explained
types job-held users tokens retention job-graph group job-fix job-run-now job-logs``) to take
only those.
"""

from __future__ import annotations

import json
import secrets
import sys
import tempfile
import threading
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

from cryptography.fernet import Fernet
from playwright.sync_api import sync_playwright
from werkzeug.serving import make_server

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app import create_app  # noqa: E402
from app.accounts import service as accounts  # noqa: E402
from app.audit.actions import Origin  # noqa: E402
from app.infra import db, housekeeper  # noqa: E402
from app.infra.queue_settings import queue_settings  # noqa: E402
from app.queue.contract.job_requests import EnqueueBody  # noqa: E402
from app.queue.contract.schedules import ScheduleCreate, parse  # noqa: E402
from app.queue.usecases import (  # noqa: E402
    claiming,
    enqueueing,
    job_actions,
    reports,
    schedules,
)
from app.queue.vocabulary.timeutil import utcnow  # noqa: E402
from app.storage import migrate  # noqa: E402
from tests.builders import PASSWORD, Api, make_token, make_user  # noqa: E402
from tests.web.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402


def seed(app, client) -> tuple[int, int, int]:  # type: ignore[no-untyped-def]
    """Sample data: a mix of statuses, a failure, a running job with progress, schedules, job
    types with limits and one paused. Returns the ids of the running job, of a job waiting in
    the queue and of a job its paused type holds back."""
    make_user(app, "ada", "admin", password=PASSWORD)
    make_user(app, "pat", "producer", password=PASSWORD)
    make_user(app, "wendy", "worker")
    producer = Api(client, make_token(app, "pat", "reports"))
    worker = Api(client, make_token(app, "wendy", "worker-1"))
    types = ["email.send", "report.build", "webhook.deliver"]
    for i in range(14):
        producer.enqueue(
            types[i % 3],
            payload={"to": f"user{i}@example.com", "template": "welcome"},
            priority=["low", "medium"][i % 2],
            idempotency_key=f"qlc-7f3a9c2e41d84b6f95e0a1c3d5b7e9f{i:02d}",  # as the client's
            partition=["tenant-acme", "tenant-globex", "tenant-initech"][i % 3],
        )
    for i in range(9):
        job = worker.claim()
        assert job is not None
        if i % 4 == 3:
            worker.post(
                f"/jobs/{job['id']}/fail",
                {"error": "SMTP 554: relay denied by mx.example.com", "retryable": False},
            )
        else:
            worker.post(f"/jobs/{job['id']}/complete", {"result": {"delivered": True}})
    running = worker.claim()
    assert running is not None
    worker.post(
        f"/jobs/{running['id']}/heartbeat", {"progress": 65, "message": "rendered 13 of 20 pages"}
    )
    make_user(app, "walt", "worker")
    Api(client, make_token(app, "walt", "worker-2")).claim(lease_seconds=120)
    cli = app.test_cli_runner()  # audited as the operator, with details
    cli.invoke(args=["user", "create", "prometheus", "--role", "monitor"])
    cli.invoke(args=["token", "create", "prometheus", "--label", "scraper"])
    admin = Api(client, make_token(app, "ada", "ops"))
    cancelled = producer.enqueue("email.send", payload={"to": "nobody@example.com"})
    producer.post(f"/jobs/{cancelled['id']}/cancel")
    admin.post(f"/jobs/{cancelled['id']}/retry")
    waiting = producer.enqueue(
        "report.build",
        payload={"report": "weekly"},
        secrets={"WAREHOUSE_PASSWORD": "not-shown-anywhere", "S3_SECRET_KEY": "nor-this"},
    )
    seed_schedules(app)
    for job_type, change in (
        ("email.send", {"rate_limit": "600/minute"}),
        ("webhook.deliver", {"paused": True}),
    ):
        answer = client.patch(f"/types/{job_type}", json=change, headers=admin.headers())
        assert answer.status_code == 200, answer.get_json()
    held = producer.enqueue("webhook.deliver", payload={"url": "https://example.com/hook"})
    seed_retention(app)
    return int(running["id"]), int(waiting["id"]), int(held["id"])


def seed_partitions(app, client) -> None:  # type: ignore[no-untyped-def]
    """A burst of one tenant's emails beside a few of the others', some of them running (fair
    turns take one of each partition): the types page's busiest partitions."""
    producer = Api(client, make_token(app, "pat", "tenants"))
    burst = {"tenant-acme": 40, "tenant-globex": 12, "tenant-initech": 5, "tenant-hooli": 3}
    burst |= {"tenant-umbrella": 2, "tenant-wayne": 1, "tenant-stark": 1}
    items = [
        {"type": "email.send", "partition": tenant, "payload": {"to": f"user{n}@{tenant}.example"}}
        for tenant, count in burst.items()
        for n in range(count)
    ]
    answer = producer.post("/jobs/batch", {"jobs": items})
    assert answer.status_code == 201, answer.get_json()
    make_user(app, "wanda", "worker")
    Api(client, make_token(app, "wanda", "worker-3")).claim(types=["email.send"], max_jobs=5)


def seed_retention(app) -> None:  # type: ignore[no-untyped-def]
    """Jobs that finished weeks ago, then a real prune of them (the retention page's record)."""
    long_ago = utcnow() - timedelta(days=40)
    with app.app_context(), db.transaction() as conn:
        pat = accounts.get_user(conn, accounts.OPERATOR, "pat").actor()
        wendy = accounts.get_user(conn, accounts.OPERATOR, "wendy").actor()
        settings = queue_settings()
        for i in range(30):
            request = EnqueueBody.parse({"type": "email.send"}, settings).to_request()
            job, _ = enqueueing.enqueue(conn, pat, request, now=long_ago).value
            if i % 6 == 5:
                job_actions.cancel(conn, pat, job.id, now=long_ago, origin=Origin(pat.name))
                continue
            claiming.claim(conn, wendy, now=long_ago, settings=settings)
            reports.complete(conn, wendy, job.id, now=long_ago, settings=settings)
    housekeeper.housekeeping(app).prune(utcnow())


def seed_schedules(app) -> None:  # type: ignore[no-untyped-def]
    """Three schedules, one run by hand and one disabled."""
    with app.app_context(), db.transaction() as conn:
        ada = accounts.get_user(conn, accounts.OPERATOR, "ada").actor()
        now = utcnow()
        for body in (
            {"name": "nightly sales report", "cron": "0 2 * * *", "timezone": "Europe/Paris",
             "type": "report.build", "catch_up": "one", "payload": {"report": "sales"}},
            {"name": "weekday digest", "cron": "30 8 * * 1-5", "timezone": "America/New_York",
             "type": "email.send", "priority": "medium"},
            {"name": "webhook sweep", "cron": "*/15 * * * *", "type": "webhook.deliver",
             "enabled": False},
        ):  # fmt: skip
            request = parse(ScheduleCreate, body, queue_settings())
            schedules.create(conn, ada, request, now=now, origin=Origin(ada.name))
        schedules.run_now(conn, ada, 1, now=now, settings=queue_settings(), origin=Origin(ada.name))


def seed_workflow(app, client) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """A small graph in one batch, forming a group: one extract, three renders after it, one
    publish after them; the extract and one render done. The ids of the publish job (its page
    shows the graph) and of the group."""
    admin = Api(client, make_token(app, "ada", "pipelines"))
    worker = Api(client, make_token(app, "wendy", "worker-2"))
    step = {"type": "report.build", "priority": "critical"}
    jobs = [
        {**step, "payload": {"step": "extract"}},
        *(
            {**step, "payload": {"step": "render", "part": n}, "after_items": [0]}
            for n in (1, 2, 3)
        ),
        {
            **step,
            "type": "webhook.deliver",
            "payload": {"step": "publish"},
            "after_items": [1, 2, 3],
        },
    ]
    group = {
        "name": "monthly-report",
        "on_complete": {"type": "email.send", "payload": {"to": "ops@example.com"}},
        "on_success": {"type": "webhook.deliver", "payload": {"event": "report.ready"}},
    }
    answer = admin.post("/jobs/batch", {"jobs": jobs, "group": group}).get_json()
    for _ in range(2):
        job = worker.claim()
        assert job is not None
        worker.post(f"/jobs/{job['id']}/complete", {"attempt": job["attempt"]})
    return answer["jobs"][4]["id"], answer["group_id"]


def seed_fixes(app, client) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """A job that failed for good on a mistyped address (its page: the edit form) and one
    waiting out an hour's backoff (its page: the Run now button); their ids."""
    admin = Api(client, make_token(app, "ada", "fixes"))
    worker = Api(client, make_token(app, "wendy", "worker-3"))
    typo = admin.enqueue(
        "email.send", payload={"to": "ada@exmaple.com", "template": "invoice"}, priority="critical"
    )
    later = admin.enqueue("report.build", payload={"report": "quarterly"}, priority="critical")
    for job, failure in (
        (typo, {"error": "SMTP 550: no such domain exmaple.com", "retryable": False}),
        (later, {"error": "warehouse connection reset", "retry_in": 3600}),
    ):
        held = worker.claim(types=[job["type"]])
        assert held is not None and held["id"] == job["id"], held
        worker.post(f"/jobs/{job['id']}/fail", failure)
    return int(typo["id"]), int(later["id"])


def seed_logs(app, client) -> int:  # type: ignore[no-untyped-def]
    """A job whose first attempt logged and failed and whose second is logging now; its id."""
    admin = Api(client, make_token(app, "ada", "imports"))
    worker = Api(client, make_token(app, "wendy", "worker-3"))
    job = admin.enqueue("email.send", payload={"import": "orders-2026-12.csv"}, priority="critical")
    attempts = (
        [
            "opening orders-2026-12.csv (18,204 rows)",
            "connecting to warehouse as loader password=hunter22",
            "rows 1-5000 loaded",
            "rows 5001-10000 loaded",
            "row 10433: <b>bad</b> date '2026-13-01', skipped",
            "warehouse: connection reset by peer",
        ],
        [
            "opening orders-2026-12.csv (18,204 rows)",
            "resuming after row 10000",
            "rows 10001-15000 loaded",
        ],
    )
    for n, lines in enumerate(attempts, 1):
        held = worker.claim(types=["email.send"])
        assert held is not None and held["id"] == job["id"], held
        worker.post(f"/jobs/{job['id']}/logs", {"attempt": n, "lines": lines})
        if n == 1:
            failed = {"error": "ConnectionResetError: warehouse", "retry_in": 0, "attempt": 1}
            worker.post(f"/jobs/{job['id']}/fail", failed)
    worker.post(f"/jobs/{job['id']}/heartbeat", {"progress": 80, "message": "loading"})
    return int(job["id"])


def main(wanted: list[str]) -> None:
    """Take every screenshot, or only the ``wanted`` ones (e.g. ``workers audit``)."""
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(
            {
                "SECRET_KEY": secrets.token_urlsafe(48),
                "SECRETS_KEY": Fernet.generate_key().decode(),
                "DATABASE_URL": f"sqlite:///{tmp}/shots.sqlite3",
                "UI_POLL_SECONDS": 60,
                "JOB_TYPE_SETTINGS": {
                    "report.build": {"max_running": 4, "max_run_seconds": 1800},
                    "email.send": {"max_run_seconds": 600, "partition_max_running": 2},
                },
            }
        )
        migrate.upgrade(db.engine(app))
        running, waiting, held = seed(app, app.test_client())
        seed_partitions(app, app.test_client())
        typo, later = seed_fixes(app, app.test_client())
        publish, group = seed_workflow(app, app.test_client())
        logged = seed_logs(app, app.test_client())
        server = make_server("127.0.0.1", 0, app, threaded=True)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        url = f"http://127.0.0.1:{server.server_port}"
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                for suffix, viewport in (("", (1280, 900)), ("-375", (375, 812))):
                    page = browser.new_page(
                        viewport={"width": viewport[0], "height": viewport[1]},
                        color_scheme="light",
                    )
                    page.goto(f"{url}/login")
                    page.get_by_label("User name").fill("ada")
                    page.get_by_label("Password").fill("not the password")
                    page.get_by_role("button", name="Sign in").click()
                    page.get_by_label("User name").fill("ada")
                    page.get_by_label("Password").fill(PASSWORD)
                    page.get_by_role("button", name="Sign in").click()
                    page.wait_for_url(f"{url}/ui/")
                    shots = {
                        "dashboard": "/ui/",
                        "jobs": "/ui/jobs",
                        "jobs-search": "/ui/jobs?status=completed&payload="
                        + quote(json.dumps({"template": "welcome"})),
                        "job": f"/ui/jobs/{running}",
                        "enqueue": "/ui/jobs/new",
                        "workers": "/ui/workers",
                        "audit": "/ui/admin/audit",
                        "schedules": "/ui/schedules/",
                        "job-explained": f"/ui/jobs/{waiting}",
                        "bulk": "/ui/jobs/bulk?status=failed&action=retry",
                        "types": "/ui/types/",
                        "job-held": f"/ui/jobs/{held}",
                        "users": "/ui/admin/users",
                        "tokens": "/ui/admin/tokens",
                        "retention": "/ui/retention",
                        "job-graph": f"/ui/jobs/{publish}",
                        "group": f"/ui/groups/{group}",
                        "job-fix": f"/ui/jobs/{typo}",
                        "job-run-now": f"/ui/jobs/{later}",
                        "job-logs": f"/ui/jobs/{logged}",
                    }
                    for name, path in shots.items():
                        if wanted and name not in wanted:
                            continue
                        page.goto(url + path)
                        if name == "bulk":  # the operator is about to confirm
                            page.get_by_label("Reason").fill("SMTP relay fixed (INC-2291)")
                        if name == "types":  # show the limits form of report.build
                            page.locator("details.type-limits summary").nth(1).click()
                        if name == "job-fix":  # an admin about to retry it, fixed
                            page.get_by_text("Edit and retry").click()
                            page.get_by_label("Payload (JSON object)").fill(
                                '{\n  "template": "invoice",\n  "to": "ada@example.com"\n}'
                            )
                            page.get_by_label("Reason (optional)").fill("typo in the domain")
                        if name == "tokens":  # a token just issued, with its copy button
                            page.get_by_label("User", exact=True).select_option("wendy")
                            page.get_by_label("Label (optional)").fill("laptop")
                            page.get_by_role("button", name="Issue token").click()
                            page.wait_for_selector("#new-token-value")
                        if name == "job-logs":  # the logs, at the foot of the job page
                            page.locator("details.attempt-log summary").first.click()  # opened
                            page.locator("#job-logs").scroll_into_view_if_needed()
                            shot = ROOT / "docs" / f"{name}{suffix}.png"
                            page.locator("#job-logs").screenshot(path=shot)
                            continue
                        page.screenshot(path=ROOT / "docs" / f"{name}{suffix}.png", full_page=True)
                    page.close()
                browser.close()
        finally:
            server.shutdown()
            thread.join(timeout=10)
            db.close(app)


if __name__ == "__main__":
    main(sys.argv[1:])
