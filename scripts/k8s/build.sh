#!/usr/bin/env bash
# Builds the Kubernetes pieces Carve is tested against (etcd, the control
# plane, kubectl, kubelet, a fake CRI runtime, the CSI sidecars and
# snapshot-controller) from the Go module proxy, plus the snapshot CRDs.
#
# usage: scripts/k8s/build.sh            (prints the bin dir on the last line)
#
# Output: $CARVE_K8S_CACHE (default ~/.cache/carve-k8s) /<key>/{bin,crd}, the key
# being derived from the pins in versions.sh. Every binary has a stamp, so a
# warm run only checks stamps. Nothing in the repository is touched: the
# wrapper modules the upstream go.mod files force on us (they carry replace
# directives, so `go install mod@version` refuses them) are generated under
# <key>/src.
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source-path=SCRIPTDIR source=versions.sh
source "$here/versions.sh"

# One setting for every build: flipping CGO_ENABLED (or any of these) between
# builds recompiles every shared package, which costs minutes per binary.
# GOTOOLCHAIN=local: a module asking for a newer Go fails loudly instead of
# fetching a toolchain. GOPROXY is left as configured.
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS='-buildvcs=false -trimpath'
ldflags_base='-s -w'

# The version strings Kubernetes' own build stamps in; without them the
# binaries report v0.0.0-master+$Format:%H$, which tools comparing server
# versions trip over.
k8s_minor=${K8S_VERSION#v1.}
k8s_minor=${k8s_minor%%.*}
k8s_ldflags=
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$k8s_minor"
  k8s_ldflags+=" -X $p.gitTreeState=clean"
done
# The staging modules (k8s.io/api, ...) carry v0.<minor>.<patch> of Kubernetes.
k8s_staging=v0.${K8S_VERSION#v1.}

log() { printf 'carve-k8s: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

mkdir -p "$K8S_BIN" "$K8S_CRD" "$K8S_DIR/stamps" "$K8S_DIR/src"
# Two builds of the same key at once would race on the wrapper modules.
exec 9>"$K8S_DIR/.lock"
flock -n 9 || { log "waiting for another build.sh on $K8S_DIR"; flock 9; }

# nice 19: builds take both cores for minutes; QEMU VMs running tests on
# the same machine must not be starved.
gorun() { nice -n 19 go "$@"; }

# A binary is current when its stamp holds the same fingerprint (what was
# built, how) and the binary exists.
fresh() { # NAME FINGERPRINT
  [[ -x $K8S_BIN/$1 && -f $K8S_DIR/stamps/$1 && $(<"$K8S_DIR/stamps/$1") == "$2" ]]
}

# wrapper NAME MODULE VERSION LOCAL_MODE SKIP_RE PKG...
# Generates $K8S_DIR/src/NAME: a module requiring MODULE@VERSION with
# MODULE's own replace directives copied (module-to-module ones as is), a
# tools.go importing each PKG so `go mod tidy` keeps their dependencies. The
# go and godebug lines are copied too, so the binaries get the GODEBUG
# defaults upstream builds with. Replaces to local paths cannot be copied:
#   LOCAL_MODE=require  -> require that module at VERSION (sub-modules
#                          released together, e.g. snapshotter's ./client)
#   LOCAL_MODE=staging  -> replace with that module at $k8s_staging
#                          (Kubernetes' ./staging/src/k8s.io/*)
# Modules matching SKIP_RE are left out (not on the proxy, nothing needs them).
# Callers may add files to the directory before calling wrapper_tidy.
wrapper() {
  local name=$1 mod=$2 ver=$3 mode=$4 skip=$5 dir gomod old oldv new newv k v p
  shift 5
  dir=$K8S_DIR/src/$name
  rm -rf "$dir" && mkdir -p "$dir"
  gomod=$(gorun mod download -json "$mod@$ver" | jq -r .GoMod)
  [[ -f $gomod ]] || die "no go.mod for $mod@$ver"
  printf 'module local/carve-k8s/%s\n\ngo %s\n' "$name" \
    "$(go mod edit -json "$gomod" | jq -r .Go)" >"$dir/go.mod"
  (
    cd "$dir"
    go mod edit -require="$mod@$ver"
    while IFS=$'\t' read -r k v; do
      go mod edit -godebug="$k=$v"
    done < <(go mod edit -json "$gomod" | jq -r '(.GoDebug // [])[] | [.Key, .Value] | @tsv')
    # '|'-separated, not tabs: read collapses runs of whitespace IFS, which
    # would shift an empty Old.Version into the next field.
    while IFS='|' read -r old oldv new newv; do
      if [[ -n $skip && $old =~ $skip ]]; then
        continue
      elif [[ -n $newv ]]; then
        go mod edit -replace="$old${oldv:+@$oldv}=$new@$newv"
      elif [[ $mode == require ]]; then
        go mod edit -require="$old@$ver"
      else
        go mod edit -replace="$old=$old@$k8s_staging"
      fi
    done < <(go mod edit -json "$gomod" |
      jq -r '(.Replace // [])[] | [.Old.Path, .Old.Version // "", .New.Path, .New.Version // ""] | join("|")')
    # No tools.go without imports: a package tools next to a package main
    # (etcd's wrapper) would make tidy fail.
    (($#)) || exit 0
    {
      printf '//go:build tools\n\n// Package tools keeps the built commands in go.mod.\npackage tools\n\nimport (\n'
      for p in "$@"; do printf '\t_ "%s"\n' "$p"; done
      printf ')\n'
    } >tools.go
  )
}

wrapper_tidy() { # NAME
  local s=$SECONDS
  # tidy prints a line per download; only errors matter.
  (cd "$K8S_DIR/src/$1" && gorun mod tidy 2> >(grep -v '^go: downloading' >&2)) ||
    die "go mod tidy failed in $K8S_DIR/src/$1"
  log "$(printf '%-24s tidy %4ds' "$1 (module)" $((SECONDS - s)))"
}

# build NAME WRAPPER PKG EXTRA_LDFLAGS FINGERPRINT
build() {
  local name=$1 src=$K8S_DIR/src/$2 pkg=$3 ld="$ldflags_base $4" fp=$5 s=$SECONDS
  (cd "$src" && gorun build -ldflags="$ld" -o "$K8S_BIN/.$name.tmp" "$pkg") ||
    die "building $name failed"
  mv -f "$K8S_BIN/.$name.tmp" "$K8S_BIN/$name"
  printf '%s' "$fp" >"$K8S_DIR/stamps/$name"
  printf '%-24s built %4ds %4d MB\n' "$name" $((SECONDS - s)) \
    $(($(stat -c %s "$K8S_BIN/$name") / 1048576))
}

# group WRAPPER_ARGS... -- 'NAME|PKG|LDFLAGS'...  (| since ldflags hold =)
# Builds the stale binaries of one wrapper module; the wrapper is only
# generated (and tidied) when at least one of them is stale.
# GEN_HOOK, if set, names a function adding files to the wrapper; its source
# is part of the fingerprint so editing it rebuilds.
group() {
  local wargs=() specs=() stale=() spec name pkg ld fp hook_src=
  while [[ $1 != -- ]]; do wargs+=("$1"); shift; done
  shift
  specs=("$@")
  if [[ -n ${GEN_HOOK:-} ]]; then
    hook_src=$(declare -f "$GEN_HOOK" | sha256sum | cut -c1-16)
  fi
  for spec in "${specs[@]}"; do
    IFS='|' read -r name pkg ld <<<"$spec"
    fp="${wargs[1]}@${wargs[2]} $pkg ld=[$ld] gen=$hook_src"
    if fresh "$name" "$fp"; then
      printf '%-24s cached\n' "$name"
    else
      stale+=("$name|$pkg|$ld|$fp")
    fi
  done
  ((${#stale[@]})) || return 0
  local pkgs=()
  for spec in "${specs[@]}"; do
    IFS='|' read -r _ pkg _ <<<"$spec"
    [[ $pkg == local/* || $pkg == . ]] || pkgs+=("$pkg")
  done
  wrapper "${wargs[@]}" "${pkgs[@]}"
  if [[ -n ${GEN_HOOK:-} ]]; then "$GEN_HOOK" "$K8S_DIR/src/${wargs[0]}"; fi
  wrapper_tidy "${wargs[0]}"
  for spec in "${stale[@]}"; do
    IFS='|' read -r name pkg ld fp <<<"$spec"
    build "$name" "${wargs[0]}" "$pkg" "$ld" "$fp"
  done
}

# etcd: a main calling etcdmain.Main is all the etcd binary is.
gen_etcd() {
  cat >"$1/main.go" <<'EOF'
// Command etcd is the etcd server, built from the server module.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
}

# fake-cri: k8s.io/cri-client's in-memory runtime (what kubemark's hollow
# nodes use) on a unix socket, so kubelet runs without containerd. Without
# SetFakeImageSize every pod fails with ImageInspectError.
gen_fakecri() {
  mkdir -p "$1/fakecri"
  cat >"$1/fakecri/main.go" <<'EOF'
// Command fake-cri serves k8s.io/cri-client's fake CRI runtime on a unix
// socket until SIGTERM or SIGINT. Pods "run" without any container.
package main

import (
	"flag"
	"log"
	"os"
	"os/signal"
	"syscall"

	fakeremote "k8s.io/cri-client/pkg/fake"
)

func main() {
	endpoint := flag.String("endpoint", "unix:///run/carve-fake-cri/cri.sock", "CRI endpoint to serve")
	flag.Parse()
	r := fakeremote.NewFakeRemoteRuntime()
	r.ImageService.SetFakeImageSize(1 << 20)
	if err := r.Start(*endpoint); err != nil {
		log.Fatal(err)
	}
	log.Printf("fake CRI runtime serving on %s", *endpoint)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	log.Printf("stopping on %v", <-sig)
	r.Stop()
}
EOF
}

total=$SECONDS
log "cache $K8S_DIR"
# One build at a time per cache: a second run (e.g. make e2e while CI's
# prefetch is still building) waits, then finds everything built.
mkdir -p "$K8S_DIR"
exec {lock_fd}>"$K8S_DIR/.build.lock"
if ! flock -n "$lock_fd"; then
  log "another build holds $K8S_DIR/.build.lock; waiting"
  flock "$lock_fd"
fi

GEN_HOOK=gen_etcd group etcd "$ETCD_MODULE" "$ETCD_VERSION" require '' -- \
  "etcd|.|"

k8s_specs=()
for c in kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet; do
  k8s_specs+=("$c|k8s.io/kubernetes/cmd/$c|$k8s_ldflags")
done
k8s_specs+=("fake-cri|local/carve-k8s/kube/fakecri|")
# sample-controller and sample-cli-plugin are not on the module proxy.
GEN_HOOK=gen_fakecri group kube "$K8S_MODULE" "$K8S_VERSION" staging \
  '^k8s\.io/sample-(controller|cli-plugin)$' -- "${k8s_specs[@]}"

# The sidecars set main.version in their Makefiles; do the same so
# --version and their startup log say what runs.
GEN_HOOK='' group provisioner "$PROVISIONER_MODULE" "$PROVISIONER_VERSION" require '' -- \
  "csi-provisioner|$PROVISIONER_MODULE/cmd/csi-provisioner|-X main.version=$PROVISIONER_VERSION"
GEN_HOOK='' group attacher "$ATTACHER_MODULE" "$ATTACHER_VERSION" require '' -- \
  "csi-attacher|$ATTACHER_MODULE/cmd/csi-attacher|-X main.version=$ATTACHER_VERSION"
GEN_HOOK='' group resizer "$RESIZER_MODULE" "$RESIZER_VERSION" require '' -- \
  "csi-resizer|$RESIZER_MODULE/cmd/csi-resizer|-X main.version=$RESIZER_VERSION"
GEN_HOOK='' group snapshotter "$SNAPSHOTTER_MODULE" "$SNAPSHOTTER_VERSION" require '' -- \
  "csi-snapshotter|$SNAPSHOTTER_MODULE/cmd/csi-snapshotter|-X main.version=$SNAPSHOTTER_VERSION" \
  "snapshot-controller|$SNAPSHOTTER_MODULE/cmd/snapshot-controller|-X main.version=$SNAPSHOTTER_VERSION"

# Snapshot CRDs: copied out of the (read-only) module cache so cluster users
# need neither Go nor the module cache.
crd_fp="$SNAPSHOT_CRD_MODULE@$SNAPSHOT_CRD_VERSION ${SNAPSHOT_CRD_GLOBS[*]}"
if [[ -f $K8S_DIR/stamps/crd && $(<"$K8S_DIR/stamps/crd") == "$crd_fp" ]]; then
  printf '%-24s cached\n' "snapshot CRDs"
else
  s=$SECONDS
  crd_src=$(gorun mod download -json "$SNAPSHOT_CRD_MODULE@$SNAPSHOT_CRD_VERSION" | jq -r .Dir)/$SNAPSHOT_CRD_DIR
  rm -f "$K8S_CRD"/*.yaml
  n=0
  for g in "${SNAPSHOT_CRD_GLOBS[@]}"; do
    for f in "$crd_src"/$g; do
      [[ -f $f ]] || die "no CRD matching $g in $crd_src"
      install -m 0644 "$f" "$K8S_CRD/"
      n=$((n + 1))
    done
  done
  printf '%s' "$crd_fp" >"$K8S_DIR/stamps/crd"
  printf '%-24s copied %3ds %d files\n' "snapshot CRDs" $((SECONDS - s)) "$n"
fi

log "done in $((SECONDS - total))s"
echo "$K8S_BIN"
