"""The queue's use cases, which the JSON API, the pages and the CLI call: enqueue, claim, report,
read and act on jobs, manage types, schedules and bulk operations, and keep house.

Rules of the house: permissions come from ``policy`` (the route in front of a use case asked the
caller's role once; a use case applies the rules that need its job); every state change is a
named edge of the state graph (``edges``) that writes its own event; the caller owns the
transaction (nothing here commits); the clock is the ``now`` argument.
"""
