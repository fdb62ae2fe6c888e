"""The HTML pages (Flask-Login sessions, CSRF, htmx)."""
