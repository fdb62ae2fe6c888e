"""The job queue, in three rooms: ``contract`` (the wire models), ``domain`` (states, edges,
policy and use cases) and ``engines`` (the SQL, shared and per database).

Nothing in this package imports Flask: the JSON API, the pages and the CLI all call the
domain's use cases with a connection, an actor and the current time.
"""
