package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// ---------------------------------------------------------------------------
// Flags

// flagArgs splits container args into flag name -> value ("" for a bare
// boolean); anything that is not --name[=value] is returned in rest.
func flagArgs(args []string) (flags map[string]string, rest []string) {
	flags = map[string]string{}
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			rest = append(rest, a)
			continue
		}
		n, v, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		flags[n] = v
	}
	return flags, rest
}

var (
	carveFlagsOnce sync.Once
	carveFlags     map[string]map[string]bool // command -> flag names
	carveFlagsErr  error
)

// carveCommandFlags builds ./cmd/carve and reads the flags of `carve
// controller -h` and `carve node -h`, so the manifests are checked against
// the binary they run.
func carveCommandFlags(t *testing.T) map[string]map[string]bool {
	t.Helper()
	carveFlagsOnce.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			carveFlagsErr = fmt.Errorf("go not on PATH: %w", err)
			return
		}
		dir, err := os.MkdirTemp("", "carve-deploy-test")
		if err != nil {
			carveFlagsErr = err
			return
		}
		defer func() { _ = os.RemoveAll(dir) }()
		bin := filepath.Join(dir, "carve")
		build := exec.Command(goBin, "build", "-o", bin, "carve.dev/carve/cmd/carve")
		if out, err := build.CombinedOutput(); err != nil {
			carveFlagsErr = fmt.Errorf("go build ./cmd/carve: %v\n%s", err, out)
			return
		}
		flagLine := regexp.MustCompile(`(?m)^  -([a-zA-Z0-9_-]+)`)
		carveFlags = map[string]map[string]bool{}
		for _, cmd := range []string{"controller", "node"} {
			// -h makes the flag set print its usage and fail: the exit
			// status is not the point, the listing is.
			out, _ := exec.Command(bin, cmd, "-h").CombinedOutput()
			set := map[string]bool{}
			for _, m := range flagLine.FindAllStringSubmatch(string(out), -1) {
				set[m[1]] = true
			}
			if !set["endpoint"] || !set["volume-groups"] {
				carveFlagsErr = fmt.Errorf("carve %s -h lists no --endpoint/--volume-groups:\n%s", cmd, out)
				return
			}
			carveFlags[cmd] = set
		}
	})
	if carveFlagsErr != nil {
		t.Fatal(carveFlagsErr)
	}
	return carveFlags
}

// The flags of the pinned sidecars, from `--help` of csi-provisioner
// v6.3.0, csi-attacher v4.13.0, csi-resizer v2.3.0 and csi-snapshotter
// v8.7.0 (logging flags included).
var (
	commonSidecarFlags = []string{
		"automaxprocs", "csi-address", "feature-gates", "http-endpoint", "kube-api-burst", "kube-api-qps",
		"kubeconfig", "leader-election", "leader-election-labels", "leader-election-lease-duration",
		"leader-election-namespace", "leader-election-renew-deadline", "leader-election-retry-period",
		"log-flush-frequency", "log-json-info-buffer-size", "log-json-split-stream", "log-text-info-buffer-size",
		"log-text-split-stream", "logging-format", "metrics-address", "metrics-path", "retry-interval-max",
		"retry-interval-start", "timeout", "v", "version", "vmodule",
	}
	sidecarFlags = map[string][]string{
		"csi-provisioner": {"capacity-for-immediate-binding", "capacity-ownerref-level", "capacity-poll-interval",
			"capacity-threads", "cloning-protection-threads", "controller-publish-readonly", "default-fstype",
			"enable-capacity", "enable-pprof", "extra-create-metadata", "immediate-topology",
			"kube-api-capacity-burst", "kube-api-capacity-qps", "master", "node-deployment",
			"node-deployment-base-delay", "node-deployment-immediate-binding", "node-deployment-max-delay",
			"prevent-volume-mode-conversion", "snapshot-orphan-sweep-interval", "strict-topology",
			"volume-name-prefix", "volume-name-uuid-length", "worker-threads"},
		"csi-attacher": {"default-fstype", "max-entries", "max-grpc-log-length", "reconcile-sync", "resync",
			"worker-threads"},
		"csi-resizer": {"extra-modify-metadata", "handle-volume-inuse-error", "master", "modify-timeout",
			"resize-timeout", "resync-period", "workers"},
		"csi-snapshotter": {"extra-create-metadata", "groupsnapshot-name-prefix", "groupsnapshot-name-uuid-length",
			"node-deployment", "resync-period", "snapshot-name-prefix", "snapshot-name-uuid-length",
			"worker-threads"},
	}
)

// envRef matches $(VAR) in args, which kubelet expands from the env.
var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// checkContainerArgs: carve containers use only carve's flags (after the
// subcommand), sidecars only their own, and every $(VAR) is defined.
func checkContainerArgs(t *testing.T, o object, spec *corev1.PodSpec) {
	t.Helper()
	for _, c := range spec.Containers {
		flags, rest := flagArgs(c.Args)
		switch {
		case c.Name == "carve":
			if len(c.Args) == 0 || (c.Args[0] != "controller" && c.Args[0] != "node") {
				t.Errorf("%v: carve's first arg must be its command (controller or node): %q", o, c.Args)
				continue
			}
			if len(rest) != 1 {
				t.Errorf("%v: carve %s: stray arguments %q (give flags as --name=value)", o, c.Args[0], rest[1:])
			}
			known := carveCommandFlags(t)[c.Args[0]]
			for f := range flags {
				if !known[f] {
					t.Errorf("%v: carve %s has no flag --%s", o, c.Args[0], f)
				}
			}
		case sidecarFlags[c.Name] != nil:
			if len(rest) != 0 {
				t.Errorf("%v: %s: stray arguments %q", o, c.Name, rest)
			}
			for f := range flags {
				if !slices.Contains(sidecarFlags[c.Name], f) && !slices.Contains(commonSidecarFlags, f) {
					t.Errorf("%v: %s has no flag --%s", o, c.Name, f)
				}
			}
		default:
			t.Errorf("%v: unexpected container %q", o, c.Name)
		}
		for _, a := range c.Args {
			for _, m := range envRef.FindAllStringSubmatch(a, -1) {
				if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == m[1] }) {
					t.Errorf("%v: %s: arg %q uses $(%s), which its env does not define", o, c.Name, a, m[1])
				}
			}
		}
	}
}
