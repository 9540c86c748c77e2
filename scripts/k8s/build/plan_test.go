package main

import (
	"slices"
	"testing"
)

// TestPlan: what is built, by name. A binary missing here is one a
// script or test looks for in bin/ (cluster.sh, e2e.sh, test/apiserver).
func TestPlan(t *testing.T) {
	v := readVersions(t)
	want := []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kubelet",
		"etcd", "fake-cri", "csi-attacher", "csi-resizer", "csi-snapshotter", "snapshot-controller", "helm",
		"csi-provisioner"}
	if got := binariesOf(basePlan(v)); !slices.Equal(got, want) {
		t.Errorf("base plan builds %v, want %v", got, want)
	}
	if got := binariesOf(upstreamPlan(v)); !slices.Equal(got, []string{"e2e.test", "agnhost", "ginkgo"}) {
		t.Errorf("upstream plan builds %v", got)
	}
	version := map[string]string{"csi-attacher": "ATTACHER", "csi-resizer": "RESIZER",
		"csi-snapshotter": "SNAPSHOTTER", "csi-provisioner": "PROVISIONER"}
	for _, g := range basePlan(v) {
		if pin, ok := version[g.binaries()[0]]; ok && g.ldflags != "-X main.version="+v.get(pin+"_VERSION") {
			t.Errorf("%s: ldflags %q, not its version", g.binaries()[0], g.ldflags)
		}
	}
}
