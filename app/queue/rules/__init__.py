"""The queue's rules: who may do what, which jobs a caller sees, backoff, type limits,
redaction, cron, retention, and the state graph's edges as compare-and-set operations."""
