"""The job-queue domain: states, validation, retry policy, sanitizing, SQL and the service.

Nothing in this package imports Flask: the JSON API, the pages and the CLI all call
``service`` with a connection, an actor and the current time.
"""
