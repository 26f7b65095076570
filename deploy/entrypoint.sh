#!/bin/sh
# Container entry point: copy the compose secret into a file only the broker's user can read
# (a bind-mounted secret keeps the host's owner), give that user the store and log volumes, then run
# the broker as that user. Any arguments go to `rocketstore broker` (and, for the health check, to
# /run/rocketstore/broker.args).
set -eu
mkdir -p /run/rocketstore
if [ -f /run/secrets/replication_secret ]; then
    install -m 600 -o rocketstore -g rocketstore /run/secrets/replication_secret /run/rocketstore/replication_secret
fi
mkdir -p /var/lib/rocketstore/logs
chown rocketstore:rocketstore /run/rocketstore /var/lib/rocketstore/store /var/lib/rocketstore/logs
# The image's health check asks the broker these arguments describe (rocketstore health --broker-args).
printf '%s\0' "$@" >/run/rocketstore/broker.args
exec setpriv --reuid=rocketstore --regid=rocketstore --init-groups rocketstore broker "$@"
