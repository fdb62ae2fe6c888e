"""Production entry point: ``gunicorn wsgi:app`` (refuses to start without a SECRET_KEY)."""

from app import create_app

app = create_app({"PRODUCTION": True})
