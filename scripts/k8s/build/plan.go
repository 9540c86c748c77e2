package main

import (
	"path"
	"strings"
)

// group is one go build: main packages of one committed module sharing
// their ldflags, so that one binary's link overlaps the next one's
// compile.
type group struct {
	module  string   // the directory under scripts/k8s/modules
	ldflags string   // beyond -s -w
	pkgs    []string // import paths, or ./dir for the module's own
	// testBin, when set, makes this group go test -c of its one package
	// into a binary of that name.
	testBin string
	// noOpt: every package of the graph but the standard library compiles
	// without optimisation (provisionerGcflags says why).
	noOpt bool
}

// binaries are the files a group leaves in bin/: go build names each
// after its package's last element.
func (g group) binaries() []string {
	if g.testBin != "" {
		return []string{g.testBin}
	}
	var out []string
	for _, p := range g.pkgs {
		out = append(out, path.Base(p))
	}
	return out
}

// basePlan is what every run builds: only what the tests run.
// Kubernetes first: the largest share of packages, and what follows in
// its graph finds client-go and friends compiled. The sidecars set
// main.version in their Makefiles; the same here, so --version and their
// startup log say what runs.
func basePlan(v versions) []group {
	k8s, snap := v.get("K8S_MODULE"), v.get("SNAPSHOTTER_MODULE")
	version := func(name string) string { return "-X main.version=" + v.get(name+"_VERSION") }
	return []group{
		{module: "kube", ldflags: k8sLdflags(v.get("K8S_VERSION")), pkgs: []string{
			k8s + "/cmd/kube-apiserver", k8s + "/cmd/kube-controller-manager",
			k8s + "/cmd/kube-scheduler", k8s + "/cmd/kubectl", k8s + "/cmd/kubelet"}},
		{module: "kube", pkgs: []string{"./etcd", "./fake-cri"}},
		{module: "kube", ldflags: version("ATTACHER"), pkgs: []string{v.get("ATTACHER_MODULE") + "/cmd/csi-attacher"}},
		{module: "kube", ldflags: version("RESIZER"), pkgs: []string{v.get("RESIZER_MODULE") + "/cmd/csi-resizer"}},
		{module: "kube", ldflags: version("SNAPSHOTTER"), pkgs: []string{
			snap + "/cmd/csi-snapshotter", snap + "/cmd/snapshot-controller"}},
		{module: "kube", ldflags: "-X " + v.get("HELM_MODULE") + "/internal/version.version=" + v.get("HELM_VERSION"),
			pkgs: []string{v.get("HELM_MODULE") + "/cmd/helm"}},
		{module: "provisioner", ldflags: version("PROVISIONER"), noOpt: true,
			pkgs: []string{v.get("PROVISIONER_MODULE") + "/cmd/csi-provisioner"}},
	}
}

// upstreamPlan is what only the upstream storage suite needs: e2e.test
// and agnhost, the helper its pods run, in the kube graph (after the
// Kubernetes binaries only the suite's own packages are left to
// compile), and the ginkgo CLI, which runs e2e.test's specs on several
// processes at once. The CLI has a module of its own, at the version of
// the Ginkgo library in the kube graph (the two speak a protocol to each
// other): its packages are none of the binaries' business.
func upstreamPlan(v versions) []group {
	k8s := v.get("K8S_MODULE")
	return []group{
		{module: "kube", ldflags: k8sLdflags(v.get("K8S_VERSION")), testBin: "e2e.test", pkgs: []string{k8s + "/test/e2e"}},
		{module: "kube", pkgs: []string{k8s + "/test/images/agnhost"}},
		{module: "ginkgo", pkgs: []string{"github.com/onsi/ginkgo/v2/ginkgo"}},
	}
}

// binariesOf lists the binaries of a plan, in order.
func binariesOf(plan []group) []string {
	var out []string
	for _, g := range plan {
		out = append(out, g.binaries()...)
	}
	return out
}

// k8sLdflags are the version strings Kubernetes' own build stamps in;
// without them the binaries report v0.0.0-master+$Format:%H$, which tools
// comparing server versions trip over.
func k8sLdflags(k8sVersion string) string {
	minor, _, _ := strings.Cut(strings.TrimPrefix(k8sVersion, "v1."), ".")
	var f []string
	for _, p := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		f = append(f, "-X "+p+".gitVersion="+k8sVersion, "-X "+p+".gitMajor=1",
			"-X "+p+".gitMinor="+minor, "-X "+p+".gitTreeState=clean")
	}
	return strings.Join(f, " ")
}

// noOptGcflags: the packages compiled without optimisation or inlining
// (-N -l): the Kubernetes project's own API types' generated code
// (conversions, defaults, validation, OpenAPI), its controllers,
// scheduler and registry, and the command-line tools' (kubectl, helm),
// whose speed no test measures. The compiler is about twice as fast on
// them (kube-scheduler from empty caches: 360 s against 736 s), and this
// build is on the cold run's longest path (the e2e waits for it). What
// carries a test cluster's load stays optimised: k8s.io/apiserver,
// apimachinery, client-go, etcd, grpc, the sidecars, the standard
// library, and the kubelet and volume code, which run in the TCG VMs. A
// pattern applies to the packages it matches in every build here, so a
// package shared by two binaries still compiles once; the flags repeat
// GOFLAGS' -dwarf=false, which a matching pattern replaces.
func noOptGcflags() []string {
	var pats []string
	for _, p := range []string{"apis", "generated", "controller", "scheduler", "registry", "printers",
		"controlplane", "kubeapiserver"} {
		pats = append(pats, "k8s.io/kubernetes/pkg/"+p+"/...")
	}
	pats = append(pats, "k8s.io/kubernetes/plugin/...", "k8s.io/kubernetes/cmd/...", "k8s.io/kubectl/...",
		"sigs.k8s.io/kustomize/...", "helm.sh/...", "github.com/tetratelabs/wazero/...", "oras.land/...",
		"github.com/ProtonMail/...", "github.com/cloudflare/circl/...")
	return gcflagsFor(pats)
}

// gcflagsFor is -gcflags=PATTERN=-N -l -dwarf=false for each pattern.
func gcflagsFor(patterns []string) []string {
	out := make([]string, len(patterns))
	for i, p := range patterns {
		out[i] = "-gcflags=" + p + "=-N -l -dwarf=false"
	}
	return out
}
