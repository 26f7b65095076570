"""The `rocketstore` command line's subcommands, one module per command family; the table that
names them and `main` are in `rocketstore/cli.py`.

- `broker`: run a broker
- `produce`, `consume`: send and read messages over the client API
- `status`: `status` and `health` (admin API)
- `admin`: operator actions (`admin elect`)
- `topic`, `consumer`, `message`, `config`: the admin API's operator commands
- `cluster`: a cluster of broker groups (`cluster list|drain`) and the registry lookups `topic`
  uses to act across groups
- `clients`: `connections`, the clients a broker heard from, by protocol (admin API)
- `console`: `console` (the web console, in the `console` package) and `console-account`
- `inspect_repair`: `inspect` and `repair` over a store on disk (the logic is in `ops/`)
- `demo`: `demo` and `crash-demo` (the demos are in `demos/`)
- `pipeline`, `pipeline_stream`: the Spark jobs (the logic is in `pipeline/`)

What they share: `common` (exit codes, `CommandError`, JSON output), `args` (argument types),
`connection` (endpoint, TLS, timeout and admin-secret options, admin calls). Each module declares
its arguments in a function of the parser and runs in one of the parsed arguments; the logic a
command only presents lives in the library it calls (`client/`, `ops/`, `pipeline/`, `demos/`),
never here. Nothing below the application imports this package.
"""
