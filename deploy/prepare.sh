#!/usr/bin/env bash
# Makes this machine ready to run the compose cluster and the container tests, and builds the
# images. Idempotent, and quick when everything exists already:
#   1. a Docker engine (Debian's docker.io, started without systemd) and a Compose (v2 plugin or
#      Debian's docker-compose v1);
#   2. the base image python:3.11-slim-bookworm: pulled when a registry answers, else bootstrapped
#      locally from Debian with mmdebstrap;
#   3. wheels of the project and its dependencies in .cluster/wheels (no network inside builds);
#   4. etcd from Debian's etcd-server package in .cluster/etcd; the replication secret in
#      .cluster/replication_secret (mode 600);
#   5. the images rocketstore:local and rocketstore-etcd:local.
# Usage: deploy/prepare.sh [--engine-only]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
CLUSTER="$ROOT/.cluster"
BASE=python:3.11-slim-bookworm
PYTHON=${PYTHON:-python3}
mkdir -p "$CLUSTER"

say() { echo "prepare: $*" >&2; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

apt_install() {
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# -- 1. the engine ------------------------------------------------------------------------------

engine() {
    if docker version >/dev/null 2>&1; then
        return
    fi
    if ! command -v dockerd >/dev/null; then
        say "installing Debian's docker.io"
        apt_install docker.io iproute2 iptables
    fi
    if ! as_root iptables -t nat -S >/dev/null 2>&1; then
        as_root update-alternatives --set iptables /usr/sbin/iptables-legacy >/dev/null
        as_root update-alternatives --set ip6tables /usr/sbin/ip6tables-legacy >/dev/null
    fi
    local mtu_args=() uplink mtu
    uplink=$(ip -o route show default 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "dev") {print $(i + 1); exit}}')
    if [ -n "$uplink" ] && [ -r "/sys/class/net/$uplink/mtu" ]; then
        mtu=$(cat "/sys/class/net/$uplink/mtu")
        if [ "$mtu" -lt 1500 ]; then mtu_args=(--mtu "$mtu"); fi
    fi
    as_root rm -f /var/run/docker.pid
    # dockerd waits for the containerd its pid file names when that pid is alive; after a killed
    # daemon the pid may belong to another process by now, and dockerd then waits for a socket
    # that never comes ("timeout waiting for containerd to start").
    local containerd_pid_file=/var/run/docker/containerd/containerd.pid containerd_pid
    containerd_pid=$(as_root cat "$containerd_pid_file" 2>/dev/null || true)
    if [ -n "$containerd_pid" ] && [ "$(as_root cat "/proc/$containerd_pid/comm" 2>/dev/null)" != containerd ]; then
        as_root rm -f "$containerd_pid_file"
    fi
    say "starting dockerd"
    as_root setsid dockerd --host unix:///var/run/docker.sock --storage-driver overlay2 "${mtu_args[@]}" \
        >>/var/log/dockerd.log 2>&1 </dev/null &
    for _ in $(seq 1 120); do
        if docker version >/dev/null 2>&1; then return; fi
        sleep 0.5
    done
    say "dockerd did not answer within 60 s; its log:"
    tail -n 30 /var/log/dockerd.log >&2
    exit 1
}

compose_tool() {
    if docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null; then
        return
    fi
    say "installing Debian's docker-compose"
    apt_install docker-compose
}

# -- 2. the base image --------------------------------------------------------------------------

base_image() {
    if docker image inspect "$BASE" >/dev/null 2>&1; then
        return
    fi
    if timeout 60 docker pull -q "$BASE" >/dev/null 2>&1; then
        return
    fi
    say "no registry: bootstrapping $BASE from Debian bookworm with mmdebstrap"
    command -v mmdebstrap >/dev/null || apt_install mmdebstrap
    local mirror work
    mirror=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' | awk '$2 == "bookworm" {print $1; exit}')
    if [ -z "$mirror" ]; then
        say "apt knows no bookworm mirror to bootstrap from"
        exit 1
    fi
    work=$(mktemp -d)
    as_root mmdebstrap --quiet --variant=minbase \
        --include=python3,python3-venv,python3-pip,python-is-python3,ca-certificates \
        bookworm "$work/root.tar" "$mirror"
    local tmp_tag="rocketstore-base-candidate:$$"
    as_root cat "$work/root.tar" | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'CMD ["python3"]' - "$tmp_tag" >/dev/null
    as_root rm -rf "$work"
    # pip refuses to install into Debian's Python without this; the image is ours to manage.
    local fixed
    fixed=$(docker run -d "$tmp_tag" sh -c 'rm -f /usr/lib/python3*/EXTERNALLY-MANAGED && python3 -c "import venv, ensurepip"')
    if [ "$(docker wait "$fixed")" != 0 ]; then
        docker logs "$fixed" >&2
        docker rm -f "$fixed" >/dev/null
        say "the bootstrapped image failed its check"
        exit 1
    fi
    docker commit "$fixed" "$BASE" >/dev/null
    docker rm "$fixed" >/dev/null
    docker rmi "$tmp_tag" >/dev/null
}

# -- 3. wheels ----------------------------------------------------------------------------------

wheels() {
    local wheels="$CLUSTER/wheels" stamp="$CLUSTER/wheels/.deps" want
    want=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
    mkdir -p "$wheels"
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        say "downloading the dependencies' wheels"
        rm -f "$wheels"/*.whl
        # The package's requirements (ranges; environment markers dropped: the image is Linux),
        # at the versions constraints.txt pins.
        local deps
        deps=$("$PYTHON" - <<'PY'
import tomllib
requirements = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print(" ".join(r.split(";")[0].replace(" ", "") for r in requirements))
PY
)
        local binary=() source=()
        for dep in $deps; do
            case "$dep" in crcmod*) source+=("$dep") ;; *) binary+=("$dep") ;; esac
        done
        "$PYTHON" -m pip download --quiet --only-binary=:all: --python-version 3.11 --implementation cp \
            --abi cp311 --abi abi3 --abi none --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
            --platform manylinux2014_x86_64 -c constraints.txt -d "$wheels" "${binary[@]}"
        # crcmod publishes no wheel: build it here (its C extension, for this machine's glibc).
        if ((${#source[@]})); then
            "$PYTHON" -m pip wheel --quiet --no-deps -c constraints.txt -w "$wheels" "${source[@]}"
        fi
        echo "$want" >"$stamp"
    fi
    # setuptools packs whatever an earlier build left in build/lib, packages no longer shipped too.
    rm -rf "$ROOT/build"
    # Byte for byte the same wheel from the same sources (fixed timestamps in the archive): the
    # image build then hits its cache, the image keeps its id, and `compose up -d` on a running
    # cluster has nothing to recreate.
    local built
    built=$(mktemp -d)
    # PIP_CONSTRAINT reaches the isolated build's own pip: the pinned setuptools builds it.
    SOURCE_DATE_EPOCH=315532800 PIP_CONSTRAINT="$ROOT/constraints.txt" "$PYTHON" -m pip wheel --quiet --no-deps \
        -w "$built" "$ROOT"
    if ! cmp -s "$built"/rocketstore-*.whl "$wheels"/rocketstore-*.whl 2>/dev/null; then
        rm -f "$wheels"/rocketstore-*.whl
        mv "$built"/rocketstore-*.whl "$wheels"/
    fi
    rm -rf "$built"
}

# -- 4. etcd and the secret ---------------------------------------------------------------------

etcd_binary() {
    local target="$CLUSTER/etcd/etcd"
    if [ -x "$target" ]; then
        return
    fi
    mkdir -p "$CLUSTER/etcd"
    local work
    work=$(mktemp -d)
    (cd "$work" && apt-get download etcd-server >/dev/null 2>&1) || {
        as_root apt-get update -qq
        (cd "$work" && apt-get download etcd-server >/dev/null)
    }
    dpkg-deb -x "$work"/etcd-server_*.deb "$work/x"
    install -m 755 "$work/x/usr/bin/etcd" "$target"
    rm -rf "$work"
}

secret() {
    local file="$CLUSTER/replication_secret"
    if [ ! -s "$file" ]; then
        (umask 077 && "$PYTHON" -c 'import secrets; print(secrets.token_hex(32))' >"$file")
    fi
    chmod 600 "$file"
}

# -- 5. images ----------------------------------------------------------------------------------

images() {
    say "building rocketstore:local and rocketstore-etcd:local"
    docker build --quiet --label org.rocketstore.image=true -t rocketstore:local . >/dev/null
    docker build --quiet --label org.rocketstore.image=true -t rocketstore-etcd:local \
        -f deploy/etcd/Dockerfile "$CLUSTER/etcd" >/dev/null
}

engine
if [ "${1:-}" = "--engine-only" ]; then
    exit 0
fi
compose_tool
base_image
wheels
etcd_binary
secret
images
say "ready"
