"""The operators' web console (`rocketstore console`): a Flask application, served by waitress on
127.0.0.1 by default, that reaches the brokers through their admin API (one endpoint of any group
is enough) and shows the cluster with a failover timeline, topics, consumer groups, messages and
dead letters, client connections and charts kept from the brokers' own counters.

Modules, each with one job:
- `config`: `ConsoleConfig`, what the console serves and whom it asks;
- `accounts`: who may log in (hashed passwords in a file, or the broker's admin secret) and roles;
- `guard`: the security decisions (CSRF tokens, role checks, log-in throttling, session age), sans-IO;
- `fleet`: the brokers the console knows and one admin client per broker, polled into snapshots;
- `history`: the counters of past snapshots as chart series and the events between them, sans-IO;
- `sampler`: the thread that polls the fleet into the history;
- `web`: the application (log-in, sessions, CSRF, security headers, the audit log); the pages are
  `pages_cluster`, `pages_topics`, `pages_groups`, `pages_messages`, `pages_connections`;
- `render`: how values show (bodies as text, JSON or hex; sizes; times);
- `serve`: waitress on the configured address, and the ready line.

Needs the `console` extra (Flask, waitress): `pip install 'rocketstore[console]'`.
"""
