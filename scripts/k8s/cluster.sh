#!/usr/bin/env bash
# A loopback Kubernetes control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler) from the binaries build.sh made.
# No kubelet: tests add their own processes with `start`.
#
# usage: scripts/k8s/cluster.sh up DIR         start; writes DIR/admin.kubeconfig
#        scripts/k8s/cluster.sh down DIR       stop everything started in DIR
#        scripts/k8s/cluster.sh env DIR        print exports: eval "$(cluster.sh env DIR)"
#        scripts/k8s/cluster.sh start DIR NAME [ARGS...]
#                          run cached binary NAME in the background, logged to
#                          DIR/logs/NAME.log and stopped by `down` before the
#                          control plane (kubelet, sidecars, ...)
#        scripts/k8s/cluster.sh stop DIR NAME  stop one process started in DIR
#
# DIR holds pki/, etcd/ (data), logs/, run/ (pid files) and the kubeconfigs;
# `up` on a DIR that was brought down resumes the same cluster state.
# Everything listens on 127.0.0.1 only. Ports can be moved (e.g. to run two
# clusters at once) with CARVE_K8S_APISERVER_PORT (6443), CARVE_K8S_ETCD_PORT
# (2379; peer and metrics use the next two), CARVE_K8S_KCM_PORT (10257) and
# CARVE_K8S_SCHEDULER_PORT (10259).
#
# A QEMU guest started with scripts/vm/run.sh --forward 6443 reaches the
# host's loopback apiserver at 10.0.2.100 (a guestfwd rule; QEMU keeps
# 10.0.2.2 for itself), so the apiserver certificate also names 10.0.2.100
# and DIR/guest.kubeconfig points there.
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source-path=SCRIPTDIR source=versions.sh
source "$here/versions.sh"

log() { printf 'carve-k8s: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
usage() { sed -n '6,13s/^# \{0,1\}//p' "$0" >&2; exit 2; }

(($# >= 2)) || usage
cmd=$1
case $cmd in up | start) mkdir -p "$2" ;; esac
[[ -d $2 ]] || die "$2: no such directory"
dir=$(cd -- "$2" && pwd -P)
shift 2

api_port=${CARVE_K8S_APISERVER_PORT:-6443}
etcd_port=${CARVE_K8S_ETCD_PORT:-2379}
kcm_port=${CARVE_K8S_KCM_PORT:-10257}
sched_port=${CARVE_K8S_SCHEDULER_PORT:-10259}
# Control plane in start order; `down` stops in reverse. etcd must go last:
# an apiserver losing etcd mid-shutdown hangs for minutes.
control_plane=(etcd kube-apiserver kube-controller-manager kube-scheduler)

now() { printf '%s' "${EPOCHREALTIME/./}"; } # microseconds
since() { local d=$(($(now) - $1)); printf '%d.%01ds' $((d / 1000000)) $((d / 100000 % 10)); }

# Pid files hold "PID PATH"; a process counts as ours only while its argv[0]
# is still PATH, so a recycled PID is never signalled. PID 1 here does not
# reap orphans: a dead process may linger as a zombie, which counts as gone
# (kill -0 would say it is alive forever).
alive() { # PIDFILE
  local pid exe st argv0
  [[ -f $1 ]] || return 1
  read -r pid exe <"$1" || return 1
  st=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$pid/status" 2>/dev/null) || return 1
  [[ -n $st && $st != Z && $st != X ]] || return 1
  argv0=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -n1)
  [[ $argv0 == "$exe" ]]
}

pidfile() { printf '%s/run/%s.pid' "$dir" "$1"; }

# start NAME ARGS...: background the cached binary NAME. The binary is its
# own statement after nohup (no subshell, no cd), so $! is its PID.
start_proc() {
  local name=$1 exe=$K8S_BIN/$1 pid i
  shift
  [[ -x $exe ]] || die "$exe missing: run scripts/k8s/build.sh"
  alive "$(pidfile "$name")" && die "$name already running in $dir"
  mkdir -p "$dir/logs" "$dir/run"
  # Logs are appended across down/up; a header marks each start.
  printf '=== %s start: %s\n' "$(date '+%F %T')" "$*" >>"$dir/logs/$name.log"
  nohup "$exe" "$@" >>"$dir/logs/$name.log" 2>&1 </dev/null &
  pid=$!
  printf '%s %s\n' "$pid" "$exe" >"$(pidfile "$name")"
  # Start order, so `down` can stop added processes newest first.
  printf '%s\n' "$name" >>"$dir/run/order"
  # Until nohup has exec'd, argv[0] is still nohup's.
  for ((i = 0; i < 50; i++)); do
    alive "$(pidfile "$name")" && return 0
    sleep 0.05
  done
  die "$name exited at once; see $dir/logs/$name.log: $(tail -n 5 "$dir/logs/$name.log")"
}

# stop NAME: SIGTERM, then SIGKILL after a grace period; wait until gone.
stop_proc() {
  local name=$1 f pid t i
  f=$(pidfile "$name")
  [[ -f $f ]] || return 0
  if alive "$f"; then
    t=$(now)
    read -r pid _ <"$f"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 200; i++)); do # 20 s, then SIGKILL
      alive "$f" || break
      sleep 0.1
    done
    if alive "$f"; then
      log "$name did not stop on SIGTERM in 20s; SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      while alive "$f"; do sleep 0.1; done
    fi
    log "$(printf '%-24s stopped in %s' "$name" "$(since "$t")")"
  fi
  rm -f "$f"
}

# wait_ready NAME TIMEOUT_S CURL_ARGS...: poll until curl prints ok, failing
# fast if the process died (a bad flag makes it exit within a second).
wait_ready() {
  local name=$1 timeout=$2 t out
  shift 2
  t=$(now)
  while :; do
    alive "$(pidfile "$name")" ||
      die "$name exited; last log lines:"$'\n'"$(tail -n 20 "$dir/logs/$name.log")"
    out=$(curl -s --max-time 2 "$@" 2>/dev/null) || true
    [[ $out == ok || $out == *'"health":"true"'* ]] && break
    (($(now) - t < timeout * 1000000)) ||
      die "$name not ready after ${timeout}s (last answer: ${out:-none}); see $dir/logs/$name.log"
    sleep 0.2
  done
  log "$(printf '%-24s ready in %s' "$name" "$(since "$t")")"
}

port_free() { # PORT: nothing may answer on 127.0.0.1:PORT
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# PKI as in the notes' appendix: a CA, the apiserver serving cert, an admin
# client cert (system:masters) and the service-account key pair. Kept across
# down/up so kubeconfigs stay valid.
make_pki() {
  local p=$dir/pki
  [[ -f $p/admin.crt ]] && return 0
  mkdir -p "$p"
  (
    cd "$p"
    umask 077
    ossl() { openssl "$@" 2>/dev/null; }
    ossl genrsa -out sa.key 2048
    ossl rsa -in sa.key -pubout -out sa.pub
    ossl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj '/CN=carve-k8s-ca'
    # 10.0.0.1: first IP of the service range (in-cluster clients);
    # 10.0.2.100: the apiserver as a QEMU guest reaches it (run.sh --forward).
    printf 'subjectAltName=%s\n' \
      'IP:127.0.0.1,IP:10.0.2.100,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local' \
      >san.ext
    ossl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj '/CN=kube-apiserver'
    ossl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt \
      -days 3650 -extfile san.ext
    ossl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr -subj '/O=system:masters/CN=admin'
    ossl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out admin.crt -days 3650
    rm -f ./*.csr ca.srl
  ) || die "making the PKI with openssl failed"
}

# Self-contained kubeconfig (certs embedded), so it can be copied anywhere,
# e.g. into a VM.
kubeconfig() { # SERVER_HOST
  local p=$dir/pki
  cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: carve
  cluster:
    server: https://$1:$api_port
    certificate-authority-data: $(base64 -w0 "$p/ca.crt")
users:
- name: admin
  user:
    client-certificate-data: $(base64 -w0 "$p/admin.crt")
    client-key-data: $(base64 -w0 "$p/admin.key")
contexts:
- name: carve
  context: {cluster: carve, user: admin}
current-context: carve
EOF
}

up() {
  local t0 n p
  t0=$(now)
  for n in "${control_plane[@]}"; do
    [[ -x $K8S_BIN/$n ]] || die "$K8S_BIN/$n missing: run scripts/k8s/build.sh"
    alive "$(pidfile "$n")" && die "$n already running in $dir (cluster.sh down $dir first)"
  done
  for p in "$etcd_port" $((etcd_port + 1)) $((etcd_port + 2)) "$api_port" "$kcm_port" "$sched_port"; do
    port_free "$p" || die "127.0.0.1:$p is in use (another cluster? see CARVE_K8S_*_PORT in $0)"
  done
  mkdir -p "$dir/logs" "$dir/run"
  # A half-started control plane is of no use: stop what did start.
  trap 'log "up failed; stopping what was started"; down' EXIT
  make_pki
  (umask 077 && kubeconfig 127.0.0.1 >"$dir/admin.kubeconfig" && kubeconfig 10.0.2.100 >"$dir/guest.kubeconfig")
  local pki=$dir/pki kc=$dir/admin.kubeconfig etcd_url=http://127.0.0.1:$etcd_port
  local peer_url=http://127.0.0.1:$((etcd_port + 1))

  start_proc etcd --data-dir="$dir/etcd" --name=default \
    --listen-client-urls="$etcd_url" --advertise-client-urls="$etcd_url" \
    --listen-peer-urls="$peer_url" --initial-advertise-peer-urls="$peer_url" \
    --initial-cluster=default="$peer_url" \
    --listen-metrics-urls=http://127.0.0.1:$((etcd_port + 2)) --log-level=warn
  wait_ready etcd 30 "$etcd_url/health"

  # --endpoint-reconciler-type=none: with a loopback advertise address the
  # default reconciler makes the apiserver exit at once ("may not be in the
  # loopback range"); the kubernetes Service just has no endpoints then.
  # The kubelet client cert lets `kubectl logs/exec` reach a kubelet later.
  start_proc kube-apiserver --etcd-servers="$etcd_url" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
    --endpoint-reconciler-type=none \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" \
    --kubelet-client-certificate="$pki/admin.crt" --kubelet-client-key="$pki/admin.key" \
    --service-account-issuer=https://kubernetes.default.svc \
    --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 --authorization-mode=Node,RBAC \
    --allow-privileged=true
  wait_ready kube-apiserver 60 --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
    "https://127.0.0.1:$api_port/readyz"

  # --controllers='*' includes persistentvolume-attach-detach-controller, so
  # VolumeAttachments appear without a kubelet. The cluster-signing pair lets
  # the CSR signer approve kubelet client certs later.
  start_proc kube-controller-manager --kubeconfig="$kc" \
    --bind-address=127.0.0.1 --secure-port="$kcm_port" --leader-elect=false \
    --controllers='*' --use-service-account-credentials=true \
    --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
    --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key"
  start_proc kube-scheduler --kubeconfig="$kc" \
    --bind-address=127.0.0.1 --secure-port="$sched_port" --leader-elect=false
  # Self-signed serving certs; /healthz and /readyz need no auth.
  wait_ready kube-controller-manager 60 -k "https://127.0.0.1:$kcm_port/healthz"
  wait_ready kube-scheduler 60 -k "https://127.0.0.1:$sched_port/readyz"
  trap - EXIT
  log "control plane up in $(since "$t0"); eval \"\$($0 env $dir)\""
}

down() {
  local t0 n i
  t0=$(now)
  [[ -d $dir/run ]] || { log "nothing started in $dir"; return 0; }
  # Processes added with `start` (kubelet, sidecars, ...) go first, newest
  # first: an apiserver with clients still watching shuts down slowly.
  if [[ -f $dir/run/order ]]; then
    while read -r n; do
      [[ " ${control_plane[*]} " == *" $n "* ]] || stop_proc "$n"
    done < <(tac "$dir/run/order" | awk '!seen[$0]++')
  fi
  for ((i = ${#control_plane[@]} - 1; i >= 0; i--)); do
    stop_proc "${control_plane[i]}"
  done
  rm -f "$dir/run/order"
  log "down in $(since "$t0")"
}

case $cmd in
up) (($# == 0)) || usage; up ;;
down) (($# == 0)) || usage; down ;;
env)
  (($# == 0)) || usage
  printf 'export KUBECONFIG=%q\n' "$dir/admin.kubeconfig"
  # $PATH stays literal: it is expanded by the shell that evals this.
  # shellcheck disable=SC2016
  printf 'export PATH=%q:"$PATH"\n' "$K8S_BIN"
  ;;
start) (($# >= 1)) || usage; start_proc "$@" ;;
stop) (($# == 1)) || usage; stop_proc "$1" ;;
*) usage ;;
esac
