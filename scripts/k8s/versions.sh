# shellcheck shell=bash disable=SC2034 # variables are used by the sourcing scripts
# The pinned versions of every Kubernetes piece Carve is tested against, in one
# place. Sourced by cluster.sh, selftest.sh and the other scripts, read by
# build/ (build.sh's Go program), never executed. The modules under
# modules/ require these versions (build/'s test checks they agree).
# Changing any pin changes the cache key below, so a new set of binaries is
# built next to the old one instead of overwriting binaries in use.

# etcd: the server module has no main package and replace directives in its
# go.mod, so modules/kube/etcd wraps etcdmain.Main.
ETCD_MODULE=go.etcd.io/etcd/server/v3
ETCD_VERSION=v3.7.3
# The server's go.mod replaces these with sibling directories; they are
# released together, at the same version.
ETCD_SIBLINGS=(go.etcd.io/etcd/api/v3 go.etcd.io/etcd/client/pkg/v3 go.etcd.io/etcd/client/v3 go.etcd.io/etcd/pkg/v3)

# Kubernetes (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
# kubelet) and k8s.io/cri-client's fake runtime. The staging modules
# (k8s.io/api, ...) are pinned to v0.<minor>.<patch> of this version by
# modules/kube's go.mod, the way the kubernetes repository replaces them
# with ./staging.
K8S_MODULE=k8s.io/kubernetes
K8S_VERSION=v1.37.2

# CSI sidecars. Each pins its own k8s.io/* versions; all but
# csi-provisioner build in modules/kube (README.md). external-provisioner stays at v6.3.0: v6.4.0 needs
# sig-storage-lib-external-provisioner/v13@v13.1.0, whose zip the module
# proxy refuses.
PROVISIONER_MODULE=github.com/kubernetes-csi/external-provisioner/v6
PROVISIONER_VERSION=v6.3.0
ATTACHER_MODULE=github.com/kubernetes-csi/external-attacher/v4
ATTACHER_VERSION=v4.13.0
RESIZER_MODULE=github.com/kubernetes-csi/external-resizer/v2
RESIZER_VERSION=v2.3.0
# csi-snapshotter and snapshot-controller come from the same module.
SNAPSHOTTER_MODULE=github.com/kubernetes-csi/external-snapshotter/v8
SNAPSHOTTER_VERSION=v8.7.0

# helm, to install Carve's chart as a user does (the e2e) and to render and
# lint it (deploy/'s tests). v4.3 builds against k8s.io/* v0.37, so it joins
# the kube graph and adds only its own packages to the build.
HELM_MODULE=helm.sh/helm/v4
HELM_VERSION=v4.3.1

# The VolumeSnapshot and VolumeGroupSnapshot CRDs are not in the snapshotter
# module's zip: they live in its client/v8 sub-module, under SNAPSHOT_CRD_DIR.
# snapshot-controller v8.7.0 needs the group-snapshot CRDs as well (without
# them it loops on listing volumegroupsnapshots).
SNAPSHOT_CRD_MODULE=github.com/kubernetes-csi/external-snapshotter/client/v8
SNAPSHOT_CRD_VERSION=$SNAPSHOTTER_VERSION
SNAPSHOT_CRD_DIR=config/crd
SNAPSHOT_CRD_GLOBS=('snapshot.storage.k8s.io_*.yaml' 'groupsnapshot.storage.k8s.io_*.yaml')

# Bump to build into a new directory rather than over the old one's
# binaries (a change to the recipe, build/ or modules/, rebuilds in place:
# its stamp is a hash of them).
K8S_RECIPE=2

# Everything built lives under K8S_CACHE/K8S_KEY: bin/ (binaries), crd/,
# addons/ and stamps/. The key is readable (Kubernetes version) plus a
# short hash of all the pins above; build/ derives the same (its test
# checks).
K8S_CACHE=${CARVE_K8S_CACHE:-${HOME:?HOME must be set}/.cache/carve-k8s}
k8s_pins() {
  printf '%s\n' "recipe=$K8S_RECIPE" \
    "$ETCD_MODULE@$ETCD_VERSION" "$K8S_MODULE@$K8S_VERSION" \
    "$PROVISIONER_MODULE@$PROVISIONER_VERSION" "$ATTACHER_MODULE@$ATTACHER_VERSION" \
    "$RESIZER_MODULE@$RESIZER_VERSION" "$SNAPSHOTTER_MODULE@$SNAPSHOTTER_VERSION" \
    "$SNAPSHOT_CRD_MODULE@$SNAPSHOT_CRD_VERSION" "$HELM_MODULE@$HELM_VERSION"
}
K8S_KEY=k8s-$K8S_VERSION-$(k8s_pins | sha256sum | cut -c1-10)
K8S_DIR=$K8S_CACHE/$K8S_KEY
K8S_BIN=$K8S_DIR/bin
K8S_CRD=$K8S_DIR/crd
