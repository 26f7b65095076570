# The RocketStore broker image. Built offline from wheels the host downloaded (deploy/prepare.sh
# puts them in .cluster/wheels); on a machine with a registry the same file works unchanged.
FROM python:3.11-slim-bookworm

# The broker runs as this user; the entry point starts as root only to hand it the secrets and
# the store volume, then drops to it.
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/rocketstore --create-home rocketstore \
    && mkdir -p /var/lib/rocketstore/store /var/lib/rocketstore/logs /etc/rocketstore \
    && chown -R rocketstore:rocketstore /var/lib/rocketstore

COPY .cluster/wheels/ /tmp/wheels/
RUN python3 -m pip install --no-cache-dir --no-index --find-links /tmp/wheels rocketstore \
    && rm -rf /tmp/wheels

COPY deploy/entrypoint.sh /usr/local/bin/rocketstore-entrypoint
VOLUME ["/var/lib/rocketstore/store", "/var/lib/rocketstore/logs"]
# listenPort (gRPC client and admin API), haListenPort (replication), remotingListenPort,
# metricsPort (Prometheus, /healthz, /readyz), as the compose cluster's first broker sets them.
EXPOSE 10911 10912 10913 10914

# Healthy when the broker itself answers its admin status call (not a port probe), on the port
# and with the secret its own arguments name (-c broker.conf, --key=value), whatever they are: the
# entry point keeps them in /run/rocketstore/broker.args.
HEALTHCHECK --interval=5s --timeout=5s --start-period=20s --retries=3 \
    CMD ["rocketstore", "health", "--broker-args", "/run/rocketstore/broker.args", "--request-timeout-s", "4"]

ENTRYPOINT ["rocketstore-entrypoint"]
CMD ["-c", "/etc/rocketstore/broker.conf"]
