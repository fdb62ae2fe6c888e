"""Real servers on this machine for the tests and the benchmarks: a prepared database, gunicorn
and granian processes, a throwaway PostgreSQL server. Neither ``tests`` nor ``bench`` owns them."""
