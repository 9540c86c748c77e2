#!/usr/bin/env bash
# Builds the Kubernetes pieces Carve is tested against (etcd, the control
# plane, kubectl, kubelet, a fake CRI runtime, the CSI sidecars and
# snapshot-controller, helm) from the Go module proxy, plus the snapshot CRDs.
#
# usage: scripts/k8s/build.sh            (prints the bin dir on the last line)
#        scripts/k8s/build.sh upstream   the same, then the Kubernetes
#            project's storage suite (e2e.test), its agnhost and the ginkgo
#            CLI that runs its specs side by side, which only
#            the upstream run needs (scripts/e2e.sh builds them beside the
#            e2e's first scenarios)
#
# Output: $CARVE_K8S_CACHE (default ~/.cache/carve-k8s) /<key>/{bin,crd}, the key
# being derived from the pins in versions.sh. One stamp covers the set, so a
# warm run only checks it. Nothing in the repository is touched: the wrapper
# modules the upstream go.mod files force on us (they carry replace
# directives, so `go install mod@version` refuses them) are generated under
# <key>/src.
set -euo pipefail
mode=${1:-}
[[ -z $mode || $mode == upstream ]] || { echo "usage: $0 [upstream]" >&2; exit 2; }
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source-path=SCRIPTDIR source=versions.sh
source "$here/versions.sh"

# One setting for every build, Carve's own (scripts/goenv.sh): flipping
# CGO_ENABLED or a flag between builds recompiles every shared package, and
# with Carve's the packages both graphs hold at the same version (client-go,
# apimachinery, grpc, ...) compile once for both. A caller's GOFLAGS does
# not apply: the binaries' stamp assumes these.
# GOTOOLCHAIN=local: a module asking for a newer Go fails loudly instead of
# fetching a toolchain. GOPROXY is left as configured.
# shellcheck source=../goenv.sh
GOFLAGS='' source "$here/../goenv.sh"
export GOTOOLCHAIN=local
ldflags_base='-s -w'
# The packages compiled without optimisation or inlining (-N -l): the
# Kubernetes project's own API types' generated code (conversions,
# defaults, validation, OpenAPI), its controllers, scheduler and
# registry, and the command-line tools' (kubectl, helm), whose speed no
# test measures. The compiler is about twice as fast on them
# (kube-scheduler from empty caches: 360 s against 736 s), and this build
# is on the cold run's longest path (the e2e waits for it). What carries
# a test cluster's load stays optimised: k8s.io/apiserver, apimachinery,
# client-go, etcd, grpc, the sidecars, the standard library, and the
# kubelet and volume code, which run in the TCG VMs. A pattern applies
# to the packages it matches in every build here, so a package shared by
# two binaries still compiles once; the flags repeat GOFLAGS'
# -dwarf=false, which a matching pattern replaces.
nopt_gcflags=()
for p in apis generated controller scheduler registry printers controlplane kubeapiserver; do
  nopt_gcflags+=("-gcflags=k8s.io/kubernetes/pkg/$p/...=-N -l -dwarf=false")
done
for p in k8s.io/kubernetes/plugin/... k8s.io/kubernetes/cmd/... k8s.io/kubectl/... sigs.k8s.io/kustomize/... \
  helm.sh/... github.com/tetratelabs/wazero/... oras.land/... github.com/ProtonMail/... github.com/cloudflare/circl/...; do
  nopt_gcflags+=("-gcflags=$p=-N -l -dwarf=false")
done

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

# Niced (CARVE_BUILD_NICE, default 10): builds take both cores for
# minutes, and a QEMU VM running tests beside them must keep its core. Not
# 19: at that weight a cold build got nothing while the unit tests and the
# VM ran, and became the path to the e2e (test/README.md).
# proxy_retry (goenv.sh): a fetch from the module proxy that fails on the
# network is tried again.
gorun() { proxy_retry nice -n "${CARVE_BUILD_NICE:-10}" go "$@"; }

# As few module graphs as the versions allow, so that client-go,
# apimachinery, grpc and the rest compile once, not once per sidecar:
#   kube         Kubernetes (staging modules at $k8s_staging), etcd,
#                csi-attacher, csi-resizer, csi-snapshotter,
#                snapshot-controller and helm. They pin k8s.io/* v0.37.0 or
#                v0.37.1; minimal version selection and the staging replaces
#                settle them on Kubernetes' own, which they build against.
#   provisioner  csi-provisioner v6.3.0 alone: it pins k8s.io/* v0.36.1 and
#                does not build against client-go v0.37 (its capacity
#                informer bridge misses a method v0.37 added), and v6.4.0
#                cannot be had (see versions.sh).
# A graph's go.mod starts from its base module's: the go and godebug lines
# (so the binaries get the GODEBUG defaults upstream builds with) and its
# replaces. Module-to-module replaces are copied; replaces to local paths
# (Kubernetes' ./staging) become replaces with the staging modules at
# $k8s_staging. Other modules whose go.mod points at local siblings (the
# snapshotter's ./client, etcd's ../api ...) are required at their released
# version instead (EXTRA).

# gen_module NAME BASE@VERSION [EXTRA@VERSION...] -- PKG...
# Generates $K8S_DIR/src/NAME and tidies it; tools.go imports each PKG that
# is not generated here, so tidy keeps their dependencies.
gen_module() {
  local name=$1 base=$2 dir=$K8S_DIR/src/$1 gomod m k v old oldv new newv s=$SECONDS
  shift 2
  local extra=() pkgs=()
  while [[ $1 != -- ]]; do extra+=("$1"); shift; done
  shift
  for m in "$@"; do [[ $m == local/* ]] || pkgs+=("$m"); done
  rm -rf "$dir" && mkdir -p "$dir"
  gomod=$(gorun mod download -json "$base" | jq -r .GoMod)
  [[ -f $gomod ]] || die "no go.mod for $base"
  printf 'module local/carve-k8s\n\ngo %s\n' "$(go mod edit -json "$gomod" | jq -r .Go)" >"$dir/go.mod"
  (
    cd "$dir"
    while IFS=$'\t' read -r k v; do
      go mod edit -godebug="$k=$v"
    done < <(go mod edit -json "$gomod" | jq -r '(.GoDebug // [])[] | [.Key, .Value] | @tsv')
    # '|'-separated, not tabs: read collapses runs of whitespace IFS, which
    # would shift an empty Old.Version into the next field.
    while IFS='|' read -r old oldv new newv; do
      # sample-controller and sample-cli-plugin are not on the module
      # proxy; nothing built here needs them.
      if [[ $old =~ ^k8s\.io/sample-(controller|cli-plugin)$ ]]; then
        continue
      elif [[ -n $newv ]]; then
        go mod edit -replace="$old${oldv:+@$oldv}=$new@$newv"
      else
        go mod edit -replace="$old=$old@$k8s_staging"
      fi
    done < <(go mod edit -json "$gomod" |
      jq -r '(.Replace // [])[] | [.Old.Path, .Old.Version // "", .New.Path, .New.Version // ""] | join("|")')
    for m in "$base" "${extra[@]}"; do go mod edit -require="$m"; done
    {
      printf '//go:build tools\n\n// Package tools keeps the built commands in go.mod.\npackage tools\n\nimport (\n'
      for m in "${pkgs[@]}"; do printf '\t_ "%s"\n' "$m"; done
      printf ')\n'
    } >tools.go
  )
  for m in "$@"; do
    if [[ $m == local/carve-k8s/* ]]; then "gen_${m#local/carve-k8s/}" "$dir"; fi
  done
  # tidy prints a line per download; only errors matter.
  (cd "$dir" && gorun mod tidy 2> >(grep -v '^go: downloading' >&2)) ||
    die "go mod tidy failed in $dir"
  log "$(printf '%-24s tidy %4ds' "$name (module)" $((SECONDS - s)))"
}

# build NAME LDFLAGS PKG...: the main packages PKG of module NAME, sharing
# these ldflags, in one go build, so that one binary's link overlaps the
# next one's compile. Built into a scratch dir and moved into bin/, so a
# killed build never leaves a half-written binary.
# A graph's extra gcflags: graph_gcflags_NAME, if set (an array).
build() {
  local src=$K8S_DIR/src/$1 ld="$ldflags_base $2" s=$SECONDS tmp=$K8S_DIR/.tmp f
  local -n extra="graph_gcflags_$1"
  shift 2
  rm -rf "$tmp" && mkdir -p "$tmp"
  (cd "$src" && gorun build "${nopt_gcflags[@]}" "${extra[@]}" -ldflags="$ld" -o "$tmp/" "$@") ||
    die "building $* failed"
  for f in "$tmp"/*; do
    mv -f "$f" "$K8S_BIN/"
    printf '%-24s %4d MB\n' "${f##*/}" $(($(stat -c %s "$K8S_BIN/${f##*/}") / 1048576))
  done
  log "$(printf 'built %d binaries in %ds' $# $((SECONDS - s)))"
}

# etcd: a main calling etcdmain.Main is all the etcd binary is.
gen_etcd() {
  mkdir -p "$1/etcd"
  cat >"$1/etcd/main.go" <<'EOF'
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
gen_fake-cri() {
  mkdir -p "$1/fake-cri"
  cat >"$1/fake-cri/main.go" <<'EOF'
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

# shared_drift: the modules whose packages both Carve (its tests, every
# build tag) and the kube graph compile, at different versions. Each one
# (and everything above it, client-go included) is compiled twice in a cold
# run; go.mod should pin the kube graph's version (scripts/goenv.sh).
shared_drift() {
  local repo=$here/../.. fmt tags
  [[ -f $repo/go.mod ]] || return 0
  fmt='{{if not .Standard}}{{with .Module}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}{{end}}'
  join <(for tags in "" vmtest e2e image; do
      (cd "$repo" && go list -deps -test -tags "$tags" -f "$fmt" ./...)
    done | grep -v '^carve.dev/' | sort -u) \
    <(cd "$K8S_DIR/src/kube" && go list -deps -f "$fmt" "${kube_pkgs[@]}" "${local_pkgs[@]}" "${sidecar_pkgs[@]}" "$helm_pkg" | sort -u) |
    awk '$2 != $3 { print "  " $1 ": carve " $2 ", kube graph " $3 }' | sort -u
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

# What gets built: only what the tests run. The sidecars set main.version
# in their Makefiles; do the same so --version and their startup log say
# what runs. Kubernetes first: the largest share of packages, and what
# follows in its graph finds client-go and friends compiled.
kube_pkgs=()
for c in kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet; do
  kube_pkgs+=("k8s.io/kubernetes/cmd/$c")
done
sidecar_pkgs=("$ATTACHER_MODULE/cmd/csi-attacher" "$RESIZER_MODULE/cmd/csi-resizer"
  "$SNAPSHOTTER_MODULE/cmd/csi-snapshotter" "$SNAPSHOTTER_MODULE/cmd/snapshot-controller")
local_pkgs=(local/carve-k8s/etcd local/carve-k8s/fake-cri)
# The upstream storage suite: in tools.go always, so that the graph (and so
# every binary's package versions) is the same whether or not it is built.
e2e_pkg=k8s.io/kubernetes/test/e2e
upstream_pkgs=("$e2e_pkg" "$e2e_pkg/storage/external" k8s.io/kubernetes/test/images/agnhost)
helm_pkg=$HELM_MODULE/cmd/helm
provisioner_pkg=$PROVISIONER_MODULE/cmd/csi-provisioner
all_pkgs=("${kube_pkgs[@]}" "${local_pkgs[@]}" "${sidecar_pkgs[@]}" "$helm_pkg" "$provisioner_pkg")

build_all() {
  gen_module kube "$K8S_MODULE@$K8S_VERSION" \
    "$ETCD_MODULE@$ETCD_VERSION" "${ETCD_SIBLINGS[@]/%/@$ETCD_VERSION}" \
    "$ATTACHER_MODULE@$ATTACHER_VERSION" "$RESIZER_MODULE@$RESIZER_VERSION" \
    "$SNAPSHOTTER_MODULE@$SNAPSHOTTER_VERSION" "$SNAPSHOT_CRD_MODULE@$SNAPSHOT_CRD_VERSION" \
    "$HELM_MODULE@$HELM_VERSION" \
    -- "${kube_pkgs[@]}" "${local_pkgs[@]}" "${sidecar_pkgs[@]}" "$helm_pkg" "${upstream_pkgs[@]}"
  local drift
  drift=$(shared_drift) || drift="  (could not compare: go list failed)"
  [[ -z $drift ]] || log "warning: compiled twice, Carve's go.mod and the kube graph differ on:"$'\n'"$drift"
  build kube "$k8s_ldflags" "${kube_pkgs[@]}"
  build kube "" "${local_pkgs[@]}"
  build kube "-X main.version=$ATTACHER_VERSION" "$ATTACHER_MODULE/cmd/csi-attacher"
  build kube "-X main.version=$RESIZER_VERSION" "$RESIZER_MODULE/cmd/csi-resizer"
  build kube "-X main.version=$SNAPSHOTTER_VERSION" "${sidecar_pkgs[@]:2}"
  build kube "-X $HELM_MODULE/internal/version.version=$HELM_VERSION" "$helm_pkg"
  gen_module provisioner "$PROVISIONER_MODULE@$PROVISIONER_VERSION" -- "$provisioner_pkg"
  provisioner_gcflags
  build provisioner "-X main.version=$PROVISIONER_VERSION" "$provisioner_pkg"
}

# provisioner_gcflags: csi-provisioner's graph shares almost no module
# version with the kube graph (k8s.io/* v0.36 against v0.37, grpc, otel,
# x/net ...), so its client-go and the rest compile a second time, on the
# cold run's longest path (480 s of it). It compiles without optimisation
# (-N -l), all of it but the standard library, which the other builds
# share: a sidecar's speed is not what the tests measure.
graph_gcflags_kube=()
graph_gcflags_provisioner=()
provisioner_gcflags() {
  local d
  graph_gcflags_provisioner=()
  for d in $(cd "$K8S_DIR/src/provisioner" &&
    go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' "$provisioner_pkg" | cut -d/ -f1 | sort -u); do
    graph_gcflags_provisioner+=("-gcflags=$d/...=-N -l -dwarf=false")
  done
  ((${#graph_gcflags_provisioner[@]})) || die "no packages listed for $provisioner_pkg"
}

# build_upstream: e2e.test (a test binary: go test -c) and agnhost, the
# helper its pods run, in the kube graph build_all generated: after the
# Kubernetes binaries, only the suite's own packages are left to compile.
build_upstream() {
  local tmp=$K8S_DIR/.tmp s=$SECONDS
  rm -rf "$tmp" && mkdir -p "$tmp"
  (cd "$K8S_DIR/src/kube" && gorun test -c "${nopt_gcflags[@]}" -ldflags="$ldflags_base $k8s_ldflags" -o "$tmp/e2e.test" "$e2e_pkg") ||
    die "building e2e.test failed"
  mv -f "$tmp/e2e.test" "$K8S_BIN/"
  printf '%-24s %4d MB\n' e2e.test $(($(stat -c %s "$K8S_BIN/e2e.test") / 1048576))
  log "$(printf 'built e2e.test in %ds' $((SECONDS - s)))"
  build kube "" k8s.io/kubernetes/test/images/agnhost
  build_ginkgo
}

# build_ginkgo: the ginkgo CLI, which runs e2e.test's specs on several
# processes at once (hack/ginkgo-e2e.sh's way), at the version of the
# Ginkgo library e2e.test was built with (the CLI and the library speak a
# protocol to each other). Its own small graph: the CLI's packages
# (golang.org/x/tools, pprof, ...) are none of the binaries' business, and
# in the kube graph they could move a version the binaries share.
build_ginkgo() {
  local v s=$SECONDS tmp=$K8S_DIR/.tmp
  v=$(cd "$K8S_DIR/src/kube" && go list -m -f '{{.Version}}' github.com/onsi/ginkgo/v2) ||
    die "the kube graph names no Ginkgo version"
  rm -rf "$tmp" && mkdir -p "$tmp"
  GOBIN=$tmp gorun install -ldflags="$ldflags_base" "github.com/onsi/ginkgo/v2/ginkgo@$v" ||
    die "building the ginkgo CLI $v failed"
  mv -f "$tmp/ginkgo" "$K8S_BIN/"
  log "$(printf 'built ginkgo %s in %ds' "$v" $((SECONDS - s)))"
}

# One stamp for the set: the pins are in the key already; this adds the
# recipe (this script, the pins file) and the Go version, so changing
# either rebuilds.
fingerprint=$({ cat "$here/build.sh" "$here/versions.sh" "$here/../goenv.sh"; go env GOVERSION; } | sha256sum | cut -c1-16)
stale=0
for p in "${all_pkgs[@]}"; do [[ -x $K8S_BIN/${p##*/} ]] || stale=1; done
[[ -f $K8S_DIR/stamps/bin && $(<"$K8S_DIR/stamps/bin") == "$fingerprint" ]] || stale=1
if ((stale)); then
  rm -f "$K8S_DIR/stamps/bin"
  build_all
  printf '%s' "$fingerprint" >"$K8S_DIR/stamps/bin"
else
  printf '%-24s cached\n' "${#all_pkgs[@]} binaries"
fi
if [[ $mode == upstream ]]; then
  if [[ -x $K8S_BIN/e2e.test && -x $K8S_BIN/agnhost && -x $K8S_BIN/ginkgo && -f $K8S_DIR/stamps/upstream &&
    $(<"$K8S_DIR/stamps/upstream") == "$fingerprint" ]]; then
    printf '%-24s cached\n' "e2e.test and agnhost"
  else
    rm -f "$K8S_DIR/stamps/upstream"
    build_upstream
    printf '%s' "$fingerprint" >"$K8S_DIR/stamps/upstream"
  fi
fi

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

# snapshot-controller's own manifests (RBAC and Deployment), the add-on as
# its project ships it; the e2e applies them with its image set to the
# version built here.
addons_fp="$SNAPSHOTTER_MODULE@$SNAPSHOTTER_VERSION snapshot-controller"
if [[ -f $K8S_DIR/stamps/addons && $(<"$K8S_DIR/stamps/addons") == "$addons_fp" ]]; then
  printf '%-24s cached\n' "snapshot-controller yaml"
else
  src=$(gorun mod download -json "$SNAPSHOTTER_MODULE@$SNAPSHOTTER_VERSION" | jq -r .Dir)/deploy/kubernetes/snapshot-controller
  mkdir -p "$K8S_DIR/addons/snapshot-controller"
  for f in rbac-snapshot-controller.yaml setup-snapshot-controller.yaml; do
    [[ -f $src/$f ]] || die "$f is not in $src"
    install -m 0644 "$src/$f" "$K8S_DIR/addons/snapshot-controller/"
  done
  printf '%s' "$addons_fp" >"$K8S_DIR/stamps/addons"
  printf '%-24s copied\n' "snapshot-controller yaml"
fi

log "done in $((SECONDS - total))s"
echo "$K8S_BIN"
