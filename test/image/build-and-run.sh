#!/usr/bin/env bash
# Builds the agenthooks image from the repo's Dockerfile with Debian's buildah
# (--isolation chroot) on a locally assembled Node 20 base, runs it, and checks
# it the way Kubernetes will use it:
#   1. base:  debootstrap --variant=minbase bookworm + this machine's Node 20
#             (node, npm, headers), committed as localhost/agenthooks-node-base:20
#   2. build: buildah bud --build-arg NODE_IMAGE=<that base> -> localhost/agenthooks:test
#   3. image config: numeric non-root USER, STOPSIGNAL SIGTERM, ports, volume,
#             entrypoint/cmd, AGENTHOOKS_* listening on 0.0.0.0
#   4. run:   buildah run of the image's entrypoint + cmd on a READ-ONLY root
#             filesystem with a data volume; waits for SERVING (gRPC health, on
#             the main and the health-only listener); the process is not root;
#             the database is on the volume
#   5. stop:  SIGTERM, expects exit status 0
#   6. socket: the image's entrypoint + cmd with --socket-mode 0660
#             --socket-group 10001 on a unix socket in a folder set up like
#             kubelet's fsGroup emptyDir (2777, group 10001); the socket is
#             srw-rw---- group 10001, a client of another UID (10002) in group
#             10001 connects, and the same UID without the group gets EACCES
# Everything it creates lives in one private buildah store under a temporary
# folder, removed at exit. Prints one line per stage; the full log is printed
# only on failure. Exits non-zero on any failure.
#
# Environment:
#   AGENTHOOKS_DEBIAN_MIRROR  Debian mirror for debootstrap (default: the first
#                             bookworm mirror in /etc/apt/sources.list*)
#   AGENTHOOKS_STORAGE_DRIVER buildah storage driver (default vfs)
#   AGENTHOOKS_IMAGE_TMP      parent folder of the temporary folder (default /var/tmp)
#   AGENTHOOKS_IMAGE_KEEP=1   keep the temporary folder (store, images, log)
#   AGENTHOOKS_IMAGE_TIMEOUT  seconds all the steps may take together (default
#                             1800; each step has its own smaller limit too)
# Takes about 3 minutes here (2 cores): base 30-60 s, build 80-110 s (npm ci
# compiles better-sqlite3), run and checks 10 s.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

repo="$(cd "$(dirname "$0")/../.." && pwd)"
cd "${repo}"
started=${SECONDS}
budget="${AGENTHOOKS_IMAGE_TIMEOUT:-1800}"
deadline=$((started + budget))

BASE_IMAGE=localhost/agenthooks-node-base:20
IMAGE=localhost/agenthooks:test
SUITE=bookworm
RUN_UID=10001
AGENT_UID=10002

say() { printf 'image: %s\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
  echo "image: must run as root (debootstrap, chroot isolation)" >&2
  exit 1
fi

work="$(mktemp -d "${AGENTHOOKS_IMAGE_TMP:-/var/tmp}/agenthooks-image.XXXXXX")"
chmod 755 "${work}"
log="${work}/log"
: >"${log}"
storage_driver="${AGENTHOOKS_STORAGE_DRIVER:-vfs}"
bah=(buildah --root "${work}/storage" --runroot "${work}/runroot" --storage-driver "${storage_driver}")
run_pid=""
step_pid="" # a bounded step running in the background
mounts=() # ours, unmounted last first
containers=()

# The script's own stderr, for messages from the exit trap (it may run inside
# a step whose output goes to the log).
exec 3>&2

cleanup() {
  local rc=$?
  set +e
  exec 2>&3
  if [ -n "${step_pid}" ] && kill -0 "${step_pid}" 2>/dev/null; then
    kill -TERM "${step_pid}" # timeout passes it on, and kills after 10 s
    wait "${step_pid}" 2>/dev/null
  fi
  if [ -n "${run_pid}" ] && kill -0 "${run_pid}" 2>/dev/null; then
    # The sidecar's own process, then the buildah run wrapping it.
    for p in $(descendants "${run_pid}"); do kill -KILL "${p}" 2>/dev/null; done
    kill -KILL "${run_pid}" 2>/dev/null
    wait "${run_pid}" 2>/dev/null
  fi
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount "${mounts[i]}" 2>/dev/null; done
  if [ "${AGENTHOOKS_IMAGE_KEEP:-0}" != 1 ] && command -v buildah >/dev/null; then
    for c in "${containers[@]}"; do
      timeout 60 "${bah[@]}" umount "${c}" >/dev/null 2>&1
      timeout 60 "${bah[@]}" rm "${c}" >/dev/null 2>&1
    done
    if [ -d "${work}/storage" ]; then
      timeout 120 "${bah[@]}" rm --all >/dev/null 2>&1
      timeout 120 "${bah[@]}" rmi --all --force >/dev/null 2>&1
    fi
  fi
  if [ "${rc}" -ne 0 ]; then
    echo "image: FAILED (exit ${rc}) after $((SECONDS - started)) s; last lines of ${log}:" >&2
    tail -n 80 "${log}" >&2
  fi
  if [ "${AGENTHOOKS_IMAGE_KEEP:-0}" = 1 ]; then
    echo "image: kept ${work}" >&2
  elif ! grep -qs " ${work}/" /proc/self/mounts; then
    rm -rf "${work}"
  else
    echo "image: ${work} still has mounts; left in place" >&2
  fi
  exit "${rc}"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Every process below PID $1, children first.
descendants() {
  local c
  # shellcheck disable=SC2013 # space-separated PIDs
  for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
    descendants "${c}"
    echo "${c}"
  done
}

# The sidecar's node process below buildah run (whose own helper processes
# carry the same command line): the one whose executable is node.
sidecar_pid() {
  local p
  for p in $(descendants "${run_pid}"); do
    if [ "$(cat "/proc/${p}/comm" 2>/dev/null)" = node ] &&
      tr '\0' ' ' <"/proc/${p}/cmdline" 2>/dev/null | grep -q '/app/dist/src/main.js serve'; then
      echo "${p}"
      return
    fi
  done
}

fail() {
  echo "image: $*" >&2
  exit 1
}

# Runs a command for at most $1 seconds, or what is left of the budget.
bounded() {
  local limit="$1" left=$((deadline - SECONDS))
  shift
  [ "${left}" -gt 0 ] || fail "out of time: the budget of ${budget} s is spent"
  [ "${limit}" -le "${left}" ] || limit=${left}
  # In the background, so that a signal to this script is handled at once.
  timeout --kill-after=10 "${limit}" "$@" &
  step_pid=$!
  local rc=0
  wait "${step_pid}" || rc=$?
  step_pid=""
  return "${rc}"
}

# bounded, with the command line and its output going to the log.
logged() {
  echo "+ ${*:2}" >>"${log}"
  bounded "$@" >>"${log}" 2>&1
}

# --- 0. tools ---------------------------------------------------------------
missing=()
command -v buildah >/dev/null || missing+=(buildah)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v setpriv >/dev/null || missing+=(util-linux)
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing ${missing[*]}"
  logged 300 apt-get update -q || fail "apt-get update failed"
  logged 600 apt-get install -y -q "${missing[@]}" ||
    fail "apt-get install ${missing[*]} failed"
fi
command -v node >/dev/null || fail "node is not installed"
command -v npm >/dev/null || fail "npm is not installed"
{ [ -d node_modules/@grpc/grpc-js ] && [ -d node_modules/@grpc/proto-loader ]; } ||
  fail "node_modules lacks @grpc/grpc-js or @grpc/proto-loader: run npm ci first"

# --- 1. base ----------------------------------------------------------------
mirror="${AGENTHOOKS_DEBIAN_MIRROR:-}"
if [ -z "${mirror}" ]; then
  # deb822 (.sources): a stanza with "URIs:" and a "Suites:" naming bookworm;
  # one-line (.list): "deb [opts] URI bookworm main".
  mirror="$(
    { cat /etc/apt/sources.list.d/*.sources 2>/dev/null || true; } | awk -v s="${SUITE}" '
      /^URIs:/ { uri = $2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == s) found = uri }
      /^$/ { uri = "" }
      END { print found }'
  )"
fi
if [ -z "${mirror}" ]; then
  mirror="$(
    { cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true; } |
      awk -v s="${SUITE}" '$1 == "deb" {
        for (i = 2; i < NF; i++) if ($(i + 1) == s && $i ~ /^https?:/) { print $i; exit } }'
  )"
fi
mirror="${mirror:-http://deb.debian.org/debian}"

node_bin="$(readlink -f "$(command -v node)")"
node_prefix="$(dirname "$(dirname "${node_bin}")")"
npm_dir="$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")"
node_version="$(node --version)"
case "${node_version}" in
  v20.*) ;;
  *) fail "this machine's node is ${node_version}, not Node 20" ;;
esac
[ -f "${npm_dir}/package.json" ] || fail "cannot find npm's folder (got ${npm_dir})"

say "base: debootstrap ${SUITE} minbase from ${mirror} + node ${node_version}"
rootfs="${work}/rootfs"
logged 600 debootstrap --variant=minbase "${SUITE}" "${rootfs}" "${mirror}" ||
  fail "debootstrap failed"
install -D -m 755 "${node_bin}" "${rootfs}/usr/local/bin/node"
mkdir -p "${rootfs}/usr/local/lib/node_modules" "${rootfs}/usr/local/include"
cp -a "${npm_dir}" "${rootfs}/usr/local/lib/node_modules/npm"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "${rootfs}/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "${rootfs}/usr/local/bin/npx"
# Headers, so node-gyp does not download them (the Dockerfile points npm at them).
if [ -f "${node_prefix}/include/node/common.gypi" ]; then
  cp -a "${node_prefix}/include/node" "${rootfs}/usr/local/include/node"
fi
# Shared libraries node needs that the minbase lacks.
for lib in $(ldd "${node_bin}" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
  if [ ! -e "${rootfs}${lib}" ] && [ ! -e "${rootfs}/usr${lib}" ]; then
    echo "copying ${lib} into the base" >>"${log}"
    install -D -m 644 "$(readlink -f "${lib}")" "${rootfs}${lib}"
  fi
done
# This machine's CA bundle, for npm inside the build (it may sit behind a
# TLS-inspecting proxy whose CA only this bundle has).
ca_env=()
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  install -D -m 644 /etc/ssl/certs/ca-certificates.crt "${rootfs}/etc/ssl/certs/ca-certificates.crt"
  ca_env=(--env NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt)
fi
rm -rf "${rootfs}/var/cache/apt/archives/"*.deb "${rootfs}/var/lib/apt/lists/"*
chroot "${rootfs}" /usr/local/bin/node -e 'process.exit(0)' >>"${log}" 2>&1 ||
  fail "node does not run inside the assembled base"

base_ctr="$(bounded 60 "${bah[@]}" from --pull=never scratch 2>>"${log}")" ||
  fail "buildah from scratch failed"
containers+=("${base_ctr}")
base_mnt="$(bounded 60 "${bah[@]}" mount "${base_ctr}" 2>>"${log}")" || fail "buildah mount failed"
logged 300 cp -a "${rootfs}/." "${base_mnt}/" || fail "copying the base into buildah failed"
rm -rf "${rootfs}"
logged 60 "${bah[@]}" umount "${base_ctr}" || fail "buildah umount failed"
logged 60 "${bah[@]}" config --os linux --arch amd64 \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env NODE_VERSION="${node_version#v}" "${ca_env[@]}" \
  --cmd node "${base_ctr}" || fail "buildah config of the base failed"
logged 300 "${bah[@]}" commit --quiet --rm "${base_ctr}" "${BASE_IMAGE}" ||
  fail "buildah commit of the base failed"
containers=()
say "base: ${BASE_IMAGE} ready ($((SECONDS - started)) s)"

# --- 2. build ---------------------------------------------------------------
say "build: buildah bud --isolation chroot -> ${IMAGE}"
build_started=${SECONDS}
budget="${AGENTHOOKS_IMAGE_TIMEOUT:-1800}"
deadline=$((started + budget))
logged 1200 "${bah[@]}" bud --isolation chroot --pull=never \
  --build-arg NODE_IMAGE="${BASE_IMAGE}" -t "${IMAGE}" -f Dockerfile . ||
  fail "buildah bud failed"
say "build: ${IMAGE} built ($((SECONDS - build_started)) s)"

# --- 3. image configuration -----------------------------------------------------
config_json="${work}/config.json"
bounded 60 "${bah[@]}" inspect --type image "${IMAGE}" >"${config_json}" 2>>"${log}" ||
  fail "buildah inspect failed"
# Prints the entrypoint + cmd, one word a line, after checking the config.
mapfile -t argv < <(
  node - "${config_json}" "${RUN_UID}" 2>>"${log}" <<'EOF'
const fs = require('node:fs');
const [file, uid] = process.argv.slice(2);
const c = JSON.parse(fs.readFileSync(file, 'utf8')).OCIv1.config;
console.error(JSON.stringify(c));
const env = Object.fromEntries((c.Env ?? []).map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));
const want = {
  User: `${uid}:${uid}`,
  StopSignal: 'SIGTERM',
  Entrypoint: JSON.stringify(['node', '/app/dist/src/main.js']),
  Cmd: JSON.stringify(['serve']),
  ExposedPorts: JSON.stringify(['50051/tcp', '50052/tcp', '8080/tcp']),
  Volumes: JSON.stringify(['/var/lib/agenthooks']),
  AGENTHOOKS_GRPC_LISTEN: '0.0.0.0:50051',
  AGENTHOOKS_HTTP_LISTEN: '0.0.0.0:8080',
  AGENTHOOKS_HEALTH_LISTEN: '0.0.0.0:50052',
  AGENTHOOKS_DB: '/var/lib/agenthooks/agenthooks.db',
  NODE_ENV: 'production',
};
const got = {
  User: c.User,
  StopSignal: c.StopSignal,
  Entrypoint: JSON.stringify(c.Entrypoint),
  Cmd: JSON.stringify(c.Cmd),
  ExposedPorts: JSON.stringify(Object.keys(c.ExposedPorts ?? {}).sort()),
  Volumes: JSON.stringify(Object.keys(c.Volumes ?? {}).sort()),
  ...Object.fromEntries(Object.keys(want).filter((k) => /^[A-Z_]+$/.test(k)).map((k) => [k, env[k]])),
};
const bad = Object.keys(want).filter((k) => got[k] !== want[k]);
for (const k of bad) console.error(`image config ${k}: want ${want[k]}, got ${got[k]}`);
if (bad.length > 0) process.exit(1);
for (const w of [...c.Entrypoint, ...c.Cmd]) console.log(w);
EOF
) || true
[ "${#argv[@]}" -ge 3 ] || fail "the image's configuration is wrong (the log lists what differs)"
say "config: user ${RUN_UID}, STOPSIGNAL SIGTERM, ports, volume, entrypoint ok"

# SIGTERM to the sidecar (as kubelet's runtime sends it); buildah run must
# then end within 30 s with the sidecar's exit status, 0.
stop_sidecar() {
  local rc
  kill -TERM "${node_pid}"
  for _ in $(seq 1 300); do
    kill -0 "${run_pid}" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "${run_pid}" 2>/dev/null; then
    cat "${run_log}" >>"${log}"
    fail "the sidecar did not stop within 30 s of SIGTERM"
  fi
  set +e
  wait "${run_pid}"
  rc=$?
  set -e
  run_pid=""
  cat "${run_log}" >>"${log}"
  [ "${rc}" -eq 0 ] || fail "the sidecar exited ${rc} after SIGTERM, not 0"
  grep -q '"msg":"stopped"' "${run_log}" || fail "the sidecar's log has no \"stopped\" line"
}

# --- 4. run -----------------------------------------------------------------
# chroot isolation shares this machine's network: listen on free ports.
mapfile -t ports < <(node -e '
  const net = require("node:net");
  const servers = [0, 1, 2].map(() => net.createServer().listen(0, "127.0.0.1"));
  Promise.all(servers.map((s) => new Promise((r) => s.on("listening", r)))).then(() => {
    for (const s of servers) console.log(s.address().port);
    for (const s of servers) s.close();
  });')
[ "${#ports[@]}" -eq 3 ] || fail "could not pick free ports"
grpc_port=${ports[0]}
http_port=${ports[1]}
health_port=${ports[2]}

run_ctr="$(bounded 60 "${bah[@]}" from --pull=never --quiet "${IMAGE}" 2>>"${log}")" ||
  fail "buildah from ${IMAGE} failed"
containers+=("${run_ctr}")
run_mnt="$(bounded 60 "${bah[@]}" mount "${run_ctr}" 2>>"${log}")" || fail "buildah mount failed"
# A read-only root filesystem: the container's root, bind-mounted read-only
# onto itself (buildah run mounts /proc, /dev, /sys, /etc/hosts... on top),
# except /run: buildah creates and removes /run/.containerenv there, so /run
# is a small tmpfs, checked empty after the run. /run/agenthooks is the mount
# point of the socket folder in stage 6.
mount --bind "${run_mnt}" "${run_mnt}"
mounts+=("${run_mnt}")
mount -o remount,bind,ro "${run_mnt}"
mount -t tmpfs -o size=1m,mode=755 tmpfs "${run_mnt}/run"
mounts+=("${run_mnt}/run")
mkdir "${run_mnt}/run/agenthooks"
touch "${run_mnt}/.rw-probe" 2>/dev/null && fail "the root filesystem is not read-only"
data="${work}/data"
mkdir -m 700 "${data}"
chown "${RUN_UID}:${RUN_UID}" "${data}"

say "run: ${argv[*]} (read-only root, grpc :${grpc_port}, health :${health_port}, http :${http_port})"
echo "+ buildah run ${run_ctr} -- ${argv[*]}" >>"${log}"
run_log="${work}/run.log"
"${bah[@]}" run --isolation chroot \
  --volume "${data}:/var/lib/agenthooks" \
  --env AGENTHOOKS_GRPC_LISTEN="0.0.0.0:${grpc_port}" \
  --env AGENTHOOKS_HTTP_LISTEN="0.0.0.0:${http_port}" \
  --env AGENTHOOKS_HEALTH_LISTEN="0.0.0.0:${health_port}" \
  --env AGENTHOOKS_ADMIN_LISTEN=off \
  --env AGENTHOOKS_AUTH_TOKEN=image-test-token \
  "${run_ctr}" -- "${argv[@]}" >"${run_log}" 2>&1 </dev/null &
run_pid=$!

health() { bounded 60 node test/image/health-check.mjs "$@" >>"${log}" 2>&1; }
# Polls the health check while buildah run is alive: at most 60 x (0.5 s +
# one Check, 2 s deadline).
wait_serving() {
  local i
  for i in $(seq 1 60); do
    if ! kill -0 "${run_pid}" 2>/dev/null; then
      cat "${run_log}" >>"${log}"
      fail "buildah run ended before the sidecar answered SERVING"
    fi
    if bounded 10 node test/image/health-check.mjs "$1" 1 0 >>"${work}/poll.log" 2>&1; then
      return 0
    fi
    sleep 0.5
  done
  tail -n 1 "${work}/poll.log" >>"${log}"
  cat "${run_log}" >>"${log}"
  fail "$1 never answered SERVING"
}
wait_serving "127.0.0.1:${health_port}"
health "127.0.0.1:${grpc_port}" 10 500 agenthooks.v1.HookService || {
  cat "${run_log}" >>"${log}"
  fail "the main gRPC listener does not answer SERVING for agenthooks.v1.HookService"
}
say "run: SERVING on the health-only and the main listener ($((SECONDS - started)) s)"

node_pid="$(sidecar_pid)"
[ -n "${node_pid}" ] || fail "cannot find the sidecar's process below buildah run"
for p in $(descendants "${run_pid}"); do
  echo "below buildah run: ${p} $(cat "/proc/${p}/comm" 2>/dev/null) uid $(awk '/^Uid:/ { print $3 }' "/proc/${p}/status" 2>/dev/null)" >>"${log}"
done
read -r _ ruid euid suid fsuid < <(grep '^Uid:' "/proc/${node_pid}/status")
read -r _ rgid egid sgid fsgid < <(grep '^Gid:' "/proc/${node_pid}/status")
echo "sidecar pid ${node_pid}: uid ${ruid} ${euid} ${suid} ${fsuid}, gid ${rgid} ${egid} ${sgid} ${fsgid}" >>"${log}"
for id in "${ruid}" "${euid}" "${suid}" "${fsuid}"; do
  [ "${id}" -ne 0 ] || fail "the sidecar runs as root"
done
{ [ "${euid}" -eq "${RUN_UID}" ] && [ "${egid}" -eq "${RUN_UID}" ]; } ||
  fail "the sidecar runs as ${euid}:${egid}, not ${RUN_UID}:${RUN_UID}"
inside_uid="$(bounded 60 "${bah[@]}" run --isolation chroot "${run_ctr}" -- node -p 'process.getuid()' 2>>"${log}")" ||
  fail "buildah run of node -p failed"
[ "${inside_uid}" = "${RUN_UID}" ] || fail "a process in the image runs as uid ${inside_uid}"
[ -f "${data}/agenthooks.db" ] || fail "no database on the data volume"
[ "$(stat -c %u "${data}/agenthooks.db")" -eq "${RUN_UID}" ] ||
  fail "the database does not belong to ${RUN_UID}"
say "run: sidecar runs as uid ${euid} gid ${egid}; database on the volume"

# --- 5. stop ----------------------------------------------------------------
stop_sidecar
left="$(cd "${run_mnt}/run" && find . -mindepth 1 ! -path ./agenthooks)"
[ -z "${left}" ] || fail "files left in /run after the run: ${left}"
say "stop: SIGTERM -> exit 0"

# --- 5b. the image's defaults without a token ----------------------------------
# Its listeners are 0.0.0.0: without a token the sidecar refuses to start
# (before it binds anything) rather than serve the API to the network.
refused_log="${work}/refused.log"
echo "+ buildah run (no token) -- ${argv[*]}" >>"${log}"
refused_rc=0
bounded 60 "${bah[@]}" run --isolation chroot \
  --volume "${data}:/var/lib/agenthooks" \
  "${run_ctr}" -- "${argv[@]}" >"${refused_log}" 2>&1 </dev/null || refused_rc=$?
cat "${refused_log}" >>"${log}"
[ "${refused_rc}" -ne 0 ] || fail "the image served its default 0.0.0.0 listeners without a token"
grep -q 'would serve the API beyond loopback without a bearer token' "${refused_log}" ||
  fail "the image's refusal without a token does not say why"
say "defaults: no token -> refused at start (exit ${refused_rc})"

# --- 6. socket shared with another user ---------------------------------------
# The Kubernetes sidecar's socket settings as flags after the image's
# entrypoint + cmd (no shell): --socket-mode 0660 --socket-group 10001. The
# folder is what kubelet makes of an emptyDir (0777) for fsGroup 10001: group
# 10001 and setgid, so only the socket's own mode keeps other users out.
sock_dir="${work}/sock"
sock="${sock_dir}/agenthooks.sock"
mkdir "${sock_dir}"
chown "root:${RUN_UID}" "${sock_dir}"
chmod 2777 "${sock_dir}"
echo "+ buildah run (socket) -- ${argv[*]} --grpc-listen unix:/run/agenthooks/agenthooks.sock --http-listen off --socket-mode 0660 --socket-group ${RUN_UID}" >>"${log}"
"${bah[@]}" run --isolation chroot \
  --volume "${data}:/var/lib/agenthooks" \
  --volume "${sock_dir}:/run/agenthooks" \
  --env AGENTHOOKS_HEALTH_LISTEN="127.0.0.1:${health_port}" \
  --env AGENTHOOKS_ADMIN_LISTEN=off \
  "${run_ctr}" -- "${argv[@]}" \
  --grpc-listen unix:/run/agenthooks/agenthooks.sock --http-listen off \
  --socket-mode 0660 --socket-group "${RUN_UID}" \
  >"${run_log}" 2>&1 </dev/null &
run_pid=$!
wait_serving "127.0.0.1:${health_port}"
ls -la "${sock_dir}" >>"${log}"
[ -S "${sock}" ] || fail "no unix socket at ${sock}"
sock_stat="$(stat -c '%a %u %g' "${sock}")"
echo "socket mode, owner, group: ${sock_stat}" >>"${log}"
[ "${sock_stat}" = "660 ${RUN_UID} ${RUN_UID}" ] ||
  fail "the socket's mode, owner and group are ${sock_stat}, not 660 ${RUN_UID} ${RUN_UID}"
bounded 60 setpriv --reuid "${AGENT_UID}" --regid "${AGENT_UID}" --groups "${RUN_UID}" \
  node test/image/health-check.mjs "unix:${sock}" 5 200 >>"${log}" 2>&1 ||
  fail "uid ${AGENT_UID} in group ${RUN_UID} cannot use the sidecar's unix socket"
# The same user without the shared group: refused by the socket's mode.
denied="${work}/denied.log"
if bounded 60 setpriv --reuid "${AGENT_UID}" --regid "${AGENT_UID}" --clear-groups \
  node test/image/health-check.mjs "unix:${sock}" 1 0 >"${denied}" 2>&1; then
  cat "${denied}" >>"${log}"
  fail "uid ${AGENT_UID} outside group ${RUN_UID} can use the sidecar's unix socket"
fi
cat "${denied}" >>"${log}"
grep -q EACCES "${denied}" ||
  fail "uid ${AGENT_UID} outside group ${RUN_UID} failed to connect, but not with EACCES"
node_pid="$(sidecar_pid)"
[ -n "${node_pid}" ] || fail "cannot find the sidecar's process below buildah run"
stop_sidecar
say "socket: srw-rw---- ${RUN_UID}:${RUN_UID}; uid ${AGENT_UID} connects in group ${RUN_UID}, not without it"

for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount "${mounts[i]}"; done
mounts=()
say "ok ($((SECONDS - started)) s)"
