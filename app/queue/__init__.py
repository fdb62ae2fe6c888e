"""The job queue, in rooms by layer: ``usecases`` (what the front ends call), ``rules`` (who may
do what, limits, backoff, redaction, and the state graph's edges as compare-and-sets), ``sql``
(the statements, over each database's ``dialects``) and ``vocabulary`` (states, values, errors);
``contract`` holds the wire models the front ends parse and answer with.

Nothing in this package imports Flask: the JSON API, the pages and the CLI all call the use
cases with a connection, an actor and the current time.
"""
