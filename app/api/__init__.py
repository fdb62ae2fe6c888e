"""The JSON API for producers and workers (Bearer tokens only, no cookies, no CSRF)."""
