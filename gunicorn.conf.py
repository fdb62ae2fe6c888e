"""gunicorn settings for production (`make serve`): threaded workers that long-polls cannot starve.

Why threads: a long-polling claim (``wait_seconds`` up to 30) occupies a request handler while it
sleeps, and a client that sends its body slowly occupies one while the body trickles in. With
gunicorn's sync workers either takes a whole process, so four of them stall the service. A
``gthread`` worker serves each request in one of ``threads`` threads, so a process keeps
answering while some threads wait; a waiting claim holds no database connection or lock, only
its thread. gevent is not used: its monkey-patching does not make sqlite3's C calls (a write
waiting on SQLite's busy timeout) cooperative, so one would stall every greenlet of the process.

Every value can be overridden from the command line or ``GUNICORN_CMD_ARGS``.
"""

import os

bind = os.environ.get("QUEUELOG_BIND", "127.0.0.1:8000")
# Processes: WEB_CONCURRENCY (gunicorn's convention), else two per core.
workers = int(os.environ.get("WEB_CONCURRENCY", 2 * (os.cpu_count() or 1)))
worker_class = "gthread"
# Requests served at once per process: long-polls, slow clients and everything else.
threads = int(os.environ.get("QUEUELOG_THREADS", 32))
# gthread's heartbeat comes from the main loop, so a 30 s long-poll never trips it; a worker
# silent for this long is stuck and is replaced.
timeout = 60
# Longer than the longest long-poll (30 s), so a graceful restart lets waiting claims answer.
graceful_timeout = 35
keepalive = 5
# Header limits stay at gunicorn's defaults; bodies are bounded by MAX_CONTENT_LENGTH in the app.
control_socket_disable = True
