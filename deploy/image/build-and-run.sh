#!/usr/bin/env bash
# Build the Neural NLP Explorer image on this machine, without Docker and without pulling python:3.11-slim, then run
# it and check it the way a class would meet it.
#
#   deploy/image/build-and-run.sh                  # as root; needs buildah, podman, debootstrap (and runc, slirp4netns)
#   deploy/image/build-and-run.sh --install-tools  # apt-get install them first
#   deploy/image/build-and-run.sh --rebuild-base --no-cache   # from scratch: new Debian base, no cached layers
#
# 1. A minimal Debian bookworm base with debootstrap (python3.11 in a venv at /opt/venv, so `python` and `pip` are
#    on PATH; `useradd` comes with the base system), imported as the local image localhost/explorer-base:bookworm.
# 2. The app image from the repository's Dockerfile with `buildah bud`, --build-arg BASE=<that image>. torch comes
#    from TORCH_INDEX: the Dockerfile's default (download.pytorch.org's CPU index) when it answers, otherwise a PEP 503
#    index served from 127.0.0.1 holding the CPU wheel that this machine's pip resolves for `torch==<version>` and
#    torch's dependencies. The Dockerfile's warm-up (SmolLM2 converted from GGUF, numba compiled) runs in the build.
# 3. The image run with podman, port 8501 published on a free loopback port, on a network with no route off the
#    machine (slirp4netns whose outbound sockets are bound to 127.0.0.1): the app must work with no hub in reach.
# 4. Checks: /_stcore/health, two views opened over the websocket with testkit/st_protocol.py (deploy/image/probe.py),
#    the server's processes run as uid 10001, HF_HUB_OFFLINE=1, and from inside the container no hub and no public
#    address answers (while the host reaches the same address).
# 5. A report (image size, build time, cold start = container start -> first view's run finished) printed as JSON and
#    written to $EXPLORER_IMAGE_WORK/report.json; the container is stopped and removed.
#
# Environment (all optional):
#   EXPLORER_IMAGE_WORK     the report's folder (default artifacts/image, git-ignored)
#   EXPLORER_IMAGE_STATE    container storage, Debian rootfs and package caches (default /var/tmp/neural-nlp-explorer-
#                           image: kept out of the repository, whose tests walk every file under it)
#   EXPLORER_IMAGE_DRIVER   storage driver (default overlay; vfs where overlay mounts are refused)
#   EXPLORER_IMAGE_NETWORK  podman --network for the run (default slirp4netns:allow_host_loopback=false,
#                           outbound_addr=127.0.0.1)
#   TORCH_INDEX             the torch index for the build (default: see 2.); TORCH_VERSION for the local index,
#                           EXPLORER_IMAGE_INDEX_PORT its port on 127.0.0.1 (default 47613)
#   EXPLORER_IMAGE_CA_BUNDLE  a CA bundle pip in the build must trust (default $PIP_CERT, $REQUESTS_CA_BUNDLE or
#                           $SSL_CERT_FILE: a TLS-inspecting proxy's CA); mounted over the base's bundle for RUN steps
#                           only, never written into a layer
#   PYTHON                  the Python that runs the probe and pip download (default .venv/bin/python, else python3)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WORK=${EXPLORER_IMAGE_WORK:-$ROOT/artifacts/image}
STATE=${EXPLORER_IMAGE_STATE:-/var/tmp/neural-nlp-explorer-image}
DRIVER=${EXPLORER_IMAGE_DRIVER:-overlay}
NETWORK=${EXPLORER_IMAGE_NETWORK:-slirp4netns:allow_host_loopback=false,outbound_addr=127.0.0.1}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
BASE_IMAGE=localhost/explorer-base:bookworm
APP_IMAGE=${EXPLORER_IMAGE:-localhost/neural-nlp-explorer:latest}
VIEWS=("lstm-gates?model=builtin:lstm-lm" "logit-lens?model=pretrained:smollm2")
if [[ -z ${PYTHON:-} ]]; then
  if [[ -x $ROOT/.venv/bin/python ]]; then PYTHON=$ROOT/.venv/bin/python; else PYTHON=python3; fi
fi

REBUILD_BASE=0 NO_CACHE=() INSTALL=0
for arg in "$@"; do
  case $arg in
    --rebuild-base) REBUILD_BASE=1 ;;
    --no-cache) NO_CACHE=(--no-cache) ;;
    --install-tools) INSTALL=1 ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done

# podman's complaint that it cannot reach systemd to schedule (or remove) the health check timer: expected here
no_systemd() { grep -v 'unable to get systemd connection' || true; }
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
now() { date +%s.%N; }
elapsed() { "$PYTHON" -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$1" "$2"; }
SCRIPT_START=$(now)

# --------------------------------------------------------------------------------------------- tools
[[ $(id -u) -eq 0 ]] || { echo "run as root (debootstrap and rootful podman)" >&2; exit 1; }
TOOLS=(buildah podman debootstrap slirp4netns)
if ((INSTALL)); then
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q buildah podman debootstrap slirp4netns runc >&2
fi
for tool in "${TOOLS[@]}"; do
  command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install buildah podman debootstrap slirp4netns runc (or --install-tools)" >&2; exit 1; }
done

mkdir -p "$WORK" "$STATE"
STORE=(--root "$STATE/storage" --runroot "$STATE/run" --storage-driver "$DRIVER")
# runc where installed: crun (podman's default on Debian) refuses a hybrid cgroup v1/v2 host such as this sandbox's.
RUNTIME=()
command -v runc >/dev/null && RUNTIME=(--runtime runc)
PODMAN=(podman "${STORE[@]}" "${RUNTIME[@]}" --cgroup-manager cgroupfs --events-backend file)
BUILDAH=(buildah "${STORE[@]}")
# Without CAP_SYS_RESOURCE (a sandbox's root) the OCI runtime cannot set podman's default rlimits (nofile 1048576,
# nproc 4194304): ask for this shell's own open-files limit and 4096 processes (runc was refused the nproc limit
# even at this shell's own value in this sandbox; 4096 is plenty for one Streamlit server).
ULIMITS=()
if (( ! ( 0x$(awk '/^CapEff/ {print $2}' /proc/self/status) >> 24 & 1 ) )); then
  ULIMITS=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096)
fi

CONTAINER="" INDEX_PID=""
cleanup() {
  [[ -n $CONTAINER ]] && "${PODMAN[@]}" rm -f -t 5 "$CONTAINER" >/dev/null 2>&1 || true
  [[ -n $INDEX_PID ]] && kill "$INDEX_PID" 2>/dev/null || true
  "${BUILDAH[@]}" rm --all >/dev/null 2>&1 || true  # working containers a failed build leaves behind
}
trap cleanup EXIT

# --------------------------------------------------------------------------------------------- 1. the base
BASE_SECONDS=0
if ((REBUILD_BASE)) || ! "${PODMAN[@]}" image exists "$BASE_IMAGE"; then
  log "debootstrap bookworm into $STATE/rootfs"
  t=$(now)
  rm -rf "$STATE/rootfs"
  mkdir -p "$STATE/debs"
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates --cache-dir="$STATE/debs" \
    bookworm "$STATE/rootfs" "$MIRROR" >"$STATE/debootstrap.log" 2>&1 \
    || { tail -20 "$STATE/debootstrap.log" >&2; exit 1; }
  # python and pip on PATH as the Dockerfile expects them: a venv (Debian's system python refuses pip installs, PEP 668)
  chroot "$STATE/rootfs" python3 -m venv /opt/venv
  # what an image does not need: apt's package lists and caches, documentation, translations, logs
  rm -rf "$STATE/rootfs"/var/lib/apt/lists/* "$STATE/rootfs"/var/cache/apt/* "$STATE/rootfs"/usr/share/doc/* \
         "$STATE/rootfs"/usr/share/man/* "$STATE/rootfs"/usr/share/info/* "$STATE/rootfs"/var/log/*.log \
         "$STATE/rootfs"/var/cache/debconf/*-old
  find "$STATE/rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
  : >"$STATE/rootfs/etc/resolv.conf"  # the build machine's resolver is not the image's; podman provides one at run
  "${PODMAN[@]}" rmi -f "$BASE_IMAGE" >/dev/null 2>&1 || true
  tar --numeric-owner -C "$STATE/rootfs" -c . | "${PODMAN[@]}" import --quiet \
    --change 'ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' --change 'CMD ["python"]' - "$BASE_IMAGE" >/dev/null
  rm -rf "$STATE/rootfs"
  BASE_SECONDS=$(elapsed "$t" "$(now)")
  log "base $BASE_IMAGE imported in ${BASE_SECONDS} s"
else
  log "base $BASE_IMAGE already built (--rebuild-base to redo it)"
fi

# --------------------------------------------------------------------------------------------- 2. the torch index
reachable() { "$PYTHON" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=15)" "$1" 2>/dev/null; }
if [[ -n ${TORCH_INDEX:-} ]]; then
  TORCH_SOURCE="given"
elif reachable https://download.pytorch.org/whl/cpu/torch/; then
  TORCH_INDEX=https://download.pytorch.org/whl/cpu TORCH_SOURCE="download.pytorch.org"
else
  # download.pytorch.org is out of reach: a PEP 503 index on 127.0.0.1 with the CPU wheel of torch==TORCH_VERSION as
  # this machine's pip resolves it (its find-links or index), and torch's dependencies.
  TORCH_VERSION=${TORCH_VERSION:-$("$PYTHON" -c "import importlib.metadata as m; print(m.version('torch').split('+')[0])" 2>/dev/null || echo 2.13.0)}
  INDEX_DIR=$STATE/torch-index
  rm -rf "$INDEX_DIR" && mkdir -p "$INDEX_DIR/files"
  log "torch==$TORCH_VERSION and its dependencies into a local index ($INDEX_DIR)"
  "$PYTHON" -m pip download -qq --only-binary=:all: --python-version 3.11 -d "$INDEX_DIR/files" "torch==$TORCH_VERSION" >&2
  if ! ls "$INDEX_DIR"/files/torch-*+cpu-*.whl >/dev/null 2>&1 || ls "$INDEX_DIR"/files/nvidia_* >/dev/null 2>&1; then
    echo "pip resolved a CUDA build of torch==$TORCH_VERSION (several GB): set TORCH_INDEX to a CPU index" >&2; exit 1
  fi
  "$PYTHON" - "$INDEX_DIR" <<'EOF'
import hashlib, re, sys
from pathlib import Path
root = Path(sys.argv[1])
projects = {}
for wheel in sorted((root / "files").glob("*.whl")):
    name = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
    projects.setdefault(name, []).append(wheel)
for name, wheels in projects.items():
    folder = root / "simple" / name
    folder.mkdir(parents=True)
    links = "".join(f'<a href="../../files/{w.name}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}">{w.name}</a>\n'
                    for w in wheels)
    (folder / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
(root / "simple" / "index.html").write_text("".join(f'<a href="{n}/">{n}</a>\n' for n in projects))
EOF
  # a fixed port where it is free: TORCH_INDEX is a build argument, and a new value would invalidate the cached layers
  PORT=$("$PYTHON" -c "
import socket, sys
s = socket.socket()
try:
    s.bind(('127.0.0.1', int(sys.argv[1])))
except OSError:
    s.bind(('127.0.0.1', 0))
print(s.getsockname()[1])" "${EXPLORER_IMAGE_INDEX_PORT:-47613}")
  "$PYTHON" -m http.server "$PORT" --bind 127.0.0.1 --directory "$INDEX_DIR" >"$STATE/index.log" 2>&1 &
  INDEX_PID=$!
  for _ in $(seq 50); do reachable "http://127.0.0.1:$PORT/simple/torch/" && break; sleep 0.2; done
  TORCH_INDEX=http://127.0.0.1:$PORT/simple TORCH_SOURCE="local index: torch $TORCH_VERSION (CPU wheel of this machine's pip)"
fi
log "torch from $TORCH_INDEX ($TORCH_SOURCE)"

# --------------------------------------------------------------------------------------------- 3. the app image
# A TLS-inspecting proxy's CA, for pip in RUN steps: bound over the base's CA bundle and over the bundle pip itself
# reads (pip's vendored certifi, or the system bundle in Debian's pip). Files that exist in the base, so a bind mount
# leaves nothing behind in the layers.
CA=${EXPLORER_IMAGE_CA_BUNDLE:-${PIP_CERT:-${REQUESTS_CA_BUNDLE:-${SSL_CERT_FILE:-}}}}
MOUNTS=()
if [[ -n $CA && -f $CA ]]; then
  for target in /etc/ssl/certs/ca-certificates.crt \
                $("${PODMAN[@]}" run --rm --network none "${ULIMITS[@]}" "$BASE_IMAGE" \
                    python -c "from pip._vendor import certifi; print(certifi.where())"); do
    [[ " ${MOUNTS[*]} " == *" $CA:$target:ro "* ]] || MOUNTS+=(-v "$CA:$target:ro")
  done
  log "pip in the build trusts $CA"
fi
log "buildah bud $APP_IMAGE (BASE=$BASE_IMAGE)"
t=$(now)
# --isolation chroot: no nested runtime or cgroups needed; --network host: the build reaches PyPI and the local
# index on 127.0.0.1; --format docker keeps the HEALTHCHECK (OCI image configs have none).
"${BUILDAH[@]}" bud --isolation chroot --network host --format docker --layers "${NO_CACHE[@]}" "${ULIMITS[@]}" \
  "${MOUNTS[@]}" --build-arg "BASE=$BASE_IMAGE" --build-arg "TORCH_INDEX=$TORCH_INDEX" \
  -t "$APP_IMAGE" -f "$ROOT/Dockerfile" "$ROOT" >"$WORK/build.log" 2>&1 \
  || { tail -40 "$WORK/build.log" >&2; exit 1; }
BUILD_SECONDS=$(elapsed "$t" "$(now)")
[[ -n $INDEX_PID ]] && { kill "$INDEX_PID" 2>/dev/null || true; INDEX_PID=""; }
"${PODMAN[@]}" image prune -f >/dev/null 2>&1 || true  # the previous build's image, now untagged
IMAGE_BYTES=$("${PODMAN[@]}" image inspect --format '{{.Size}}' "$APP_IMAGE")
log "built in ${BUILD_SECONDS} s, $((IMAGE_BYTES / 1000000)) MB (log: $WORK/build.log)"

# --------------------------------------------------------------------------------------------- 4. run and probe
PORT=$("$PYTHON" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
CONTAINER=explorer-image-check-$$
log "podman run $APP_IMAGE on 127.0.0.1:$PORT (--network $NETWORK)"
STARTED=$(now)
# --health-interval=disable: podman would schedule the image's HEALTHCHECK with systemd timers (none here); the
# check is run once by hand below.
"${PODMAN[@]}" run -d --name "$CONTAINER" --network "$NETWORK" -p "127.0.0.1:$PORT:8501" "${ULIMITS[@]}" \
  --health-interval=disable "$APP_IMAGE" >/dev/null 2> >(no_systemd >&2)
PROBE_ARGS=()
for view in "${VIEWS[@]}"; do PROBE_ARGS+=(--view "$view"); done
PROBE=$("$PYTHON" "$ROOT/deploy/image/probe.py" --base "http://127.0.0.1:$PORT" --started "$STARTED" "${PROBE_ARGS[@]}") \
  || log "the probe found a problem: $PROBE"

# the server's processes, as the host sees them: every one must run as uid 10001 (no user namespace here)
PIDS=$("${PODMAN[@]}" top "$CONTAINER" hpid 2>/dev/null | tail -n +2 || true)
UIDS=$(for pid in $PIDS; do awk '/^Uid:/ {print $3}' "/proc/$pid/status" 2>/dev/null; done | sort -u | paste -sd, -)
PROCESSES=$("${PODMAN[@]}" top "$CONTAINER" user args 2>/dev/null | tail -n +2 | sed 's/  */ /g' | paste -sd';' - || true)
HF_OFFLINE=$("${PODMAN[@]}" exec "$CONTAINER" printenv HF_HUB_OFFLINE || true)
HEALTH=$("${PODMAN[@]}" healthcheck run "$CONTAINER" >/dev/null 2>&1 && echo healthy || echo unhealthy)

# the network: the host reaches a public address (PyPI's), the container reaches neither it nor a model hub
PUBLIC_IP=$("$PYTHON" -c "import socket; print(socket.gethostbyname('pypi.org'))" 2>/dev/null || echo 1.1.1.1)
HOST_REACHES=$("$PYTHON" -c "import socket, sys; socket.create_connection((sys.argv[1], 443), timeout=10); print('true')" \
  "$PUBLIC_IP" 2>/dev/null || echo false)
NET_CHECK='
import json, socket, sys
def attempt(host):
    try:
        socket.create_connection((host, 443), timeout=10).close()
        return "reached"
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
print(json.dumps({h: attempt(h) for h in sys.argv[1:]}))'
FROM_CONTAINER=$("${PODMAN[@]}" exec "$CONTAINER" python -c "$NET_CHECK" huggingface.co cdn-lfs.huggingface.co "$PUBLIC_IP" \
  || echo "{}")
LOG_TAIL=$("${PODMAN[@]}" logs "$CONTAINER" 2>&1 | tail -c 4000)

"${PODMAN[@]}" rm -f -t 10 "$CONTAINER" >/dev/null 2> >(no_systemd >&2) && CONTAINER=""

# --------------------------------------------------------------------------------------------- 5. the report
export REPORT_IMAGE=$APP_IMAGE REPORT_BASE=$BASE_IMAGE REPORT_BYTES=$IMAGE_BYTES REPORT_BASE_S=$BASE_SECONDS \
  REPORT_BUILD_S=$BUILD_SECONDS REPORT_CACHED=${#NO_CACHE[@]} REPORT_TORCH="$TORCH_INDEX ($TORCH_SOURCE)" \
  REPORT_PROBE=${PROBE:-'{}'} REPORT_UIDS=$UIDS REPORT_PROCS=$PROCESSES REPORT_HF=$HF_OFFLINE REPORT_HEALTH=$HEALTH \
  REPORT_PUBLIC=$PUBLIC_IP REPORT_HOST_REACHES=$HOST_REACHES REPORT_FROM=$FROM_CONTAINER REPORT_NET=$NETWORK \
  REPORT_LOG=$LOG_TAIL REPORT_START=$SCRIPT_START
"$PYTHON" - "$WORK/report.json" <<'EOF'
import json, os, sys, time
e = os.environ
probe = json.loads(e["REPORT_PROBE"] or "{}")
reached = json.loads(e["REPORT_FROM"] or "{}")
uids = [int(u) for u in e["REPORT_UIDS"].split(",") if u]
views = probe.get("views", [])
report = {
    "image": e["REPORT_IMAGE"], "base": e["REPORT_BASE"], "torch_index": e["REPORT_TORCH"],
    "image_size_bytes": int(e["REPORT_BYTES"]), "image_size_mb": round(int(e["REPORT_BYTES"]) / 1e6),
    "base_build_seconds": float(e["REPORT_BASE_S"]),  # 0 when the base was already there
    "build_seconds": float(e["REPORT_BUILD_S"]), "build_without_cache": e["REPORT_CACHED"] == "1",
    "health_ok": probe.get("health_ok", False), "health_seconds": probe.get("health_seconds"),
    "cold_start_seconds": probe.get("cold_start_seconds"),  # container start -> the first view's run finished
    "views": views, "views_ok": bool(views) and all(v["status"] == "ok" and v.get("charts") for v in views),
    "image_healthcheck": e["REPORT_HEALTH"],
    "uids": uids, "non_root": bool(uids) and set(uids) == {10001}, "processes": e["REPORT_PROCS"],
    "hf_hub_offline": e["REPORT_HF"] == "1", "network": e["REPORT_NET"],
    "from_container": reached, "public_address": e["REPORT_PUBLIC"],
    "host_reaches_public_address": e["REPORT_HOST_REACHES"] == "true",
    "hub_reached": any(v == "reached" for v in reached.values()) or not reached,
    "script_seconds": round(time.time() - float(e["REPORT_START"]), 1),
}
report["ok"] = all([report["health_ok"], report["views_ok"], report["non_root"], report["hf_hub_offline"],
                    not report["hub_reached"], report["image_healthcheck"] == "healthy"])
if not report["ok"]:
    report["container_log_tail"] = e["REPORT_LOG"]
with open(sys.argv[1], "w") as f:
    json.dump(report, f, indent=2)
print(json.dumps(report, indent=2))
sys.exit(0 if report["ok"] else 1)
EOF
