"""Infrastructure the front ends stand on (Flask): the database per app and its request
transactions, route guards, problem details and error pages, request limits, browser headers,
URL converters, rate-limit storage, secrets at rest, the queue settings per app."""
