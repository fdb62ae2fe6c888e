"""Benchmarks (``make bench``): figures as ratios against floors measured in the same run."""

import secrets

# The servers' SECRET_KEY, new each run: production refuses a predictable key.
SECRET = secrets.token_urlsafe(48)
