#!/usr/bin/env bash
# The project's compose file under the project name "rocketstore" (or $RS_COMPOSE_PROJECT), with
# Compose v2 (`docker compose`) when installed, else Debian's docker-compose v1. Arguments go to
# compose.
set -euo pipefail
cd "$(dirname "$0")/.."
project=${RS_COMPOSE_PROJECT:-rocketstore}
if docker compose version >/dev/null 2>&1; then
    exec docker compose -p "$project" -f docker-compose.yml "$@"
fi
exec docker-compose -p "$project" -f docker-compose.yml "$@"
