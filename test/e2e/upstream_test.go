//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"carve.dev/carve/driver/api/v1alpha1"
)

// TestUpstreamStorageSuite runs the Kubernetes project's external storage
// suite (e2e.test, built from k8s.io/kubernetes at the cluster's version)
// against Carve as installed for the run, once per test-driver file of
// test/upstream (thick, thin). CARVE_E2E_UPSTREAM picks the selection:
// "off" (the default of scripts/e2e.sh, to run one scenario quickly),
// "subset" (make e2e and so CI: every test suite and test pattern at least
// once, upstreamCI) or "full" (make e2e-upstream: every spec for Carve's
// capabilities). Exclusions (upstreamSkip) hold in both, each with its
// reason.
func TestUpstreamStorageSuite(t *testing.T) {
	sel := os.Getenv("CARVE_E2E_UPSTREAM")
	switch sel {
	case "", "off":
		t.Skip("the upstream storage suite is off: CARVE_E2E_UPSTREAM=subset or full runs it")
	case "subset", "full":
	default:
		t.Fatalf("CARVE_E2E_UPSTREAM=%q: want off, subset or full", sel)
	}
	e2eTest, images := h.waitUpstreamBuild(t)
	if err := h.importUpstreamImages(images); err != nil {
		t.Fatal(err)
	}
	for _, d := range upstreamDrivers(sel) {
		t.Run(d.name, func(t *testing.T) {
			start := time.Now()
			r, err := h.runUpstream(e2eTest, d)
			if r != nil {
				logf("upstream %s (%s): %s in %s", d.name, sel, r, time.Since(start).Round(time.Second))
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(r.failed) > 0 {
				t.Errorf("%d upstream specs failed (log: %s):\n  %s", len(r.failed), d.log(h.logs),
					strings.Join(r.failed, "\n  "))
			}
			// The subset's specs are chosen to run here: one that
			// skips itself means the selection no longer covers what it
			// claims to (the suite renamed it, or the cluster lost what
			// it needs).
			if sel == "subset" && len(r.skipped) > 0 {
				t.Errorf("%d specs of the subset skipped themselves (log: %s):\n  %s", len(r.skipped), d.log(h.logs),
					strings.Join(r.skipped, "\n  "))
			}
			if miss := r.unmatched(d.focus); sel == "subset" && len(miss) > 0 {
				t.Errorf("%d entries of the subset selected no spec (log: %s):\n  %s", len(miss), d.log(h.logs),
					strings.Join(miss, "\n  "))
			}
			if r.passed == 0 {
				t.Errorf("no upstream spec passed (log: %s)", d.log(h.logs))
			}
			if err := h.waitVolumesDeletedSince(start, 5*time.Minute); err != nil {
				t.Error(err)
			}
		})
	}
}

// upstreamDriver is one run of e2e.test: a test-driver file and the specs
// to focus on within it.
type upstreamDriver struct {
	name, file string
	focus      []string // regexps of spec texts; nil: all of the driver's
}

func (d upstreamDriver) log(dir string) string {
	return filepath.Join(dir, "upstream-"+d.name+".log")
}

// upstreamDrivers: both driver files, each with its share of the
// selection. In the full selection, CARVE_E2E_UPSTREAM_FOCUS, a regexp of
// spec texts, narrows it (to run again the specs a run failed), and
// CARVE_E2E_UPSTREAM_DRIVERS=thin (or thick) runs one file only.
func upstreamDrivers(sel string) []upstreamDriver {
	thick := upstreamDriver{name: "thick", file: "test/upstream/carve-thick.yaml"}
	thin := upstreamDriver{name: "thin", file: "test/upstream/carve-thin.yaml"}
	if sel != "full" {
		thick.focus, thin.focus = upstreamCI, upstreamCIThin
		return []upstreamDriver{thick, thin}
	}
	if f := os.Getenv("CARVE_E2E_UPSTREAM_FOCUS"); f != "" {
		thick.focus, thin.focus = []string{f}, []string{f}
	}
	switch os.Getenv("CARVE_E2E_UPSTREAM_DRIVERS") {
	case "thick":
		return []upstreamDriver{thick}
	case "thin":
		return []upstreamDriver{thin}
	}
	return []upstreamDriver{thick, thin}
}

// waitUpstreamBuild waits for scripts/e2e.sh's background build of
// e2e.test, agnhost and their images (it starts once the cluster's
// binaries are built, so that it overlaps the first scenarios), and
// returns e2e.test's path and the images' directory.
func (x *harness) waitUpstreamBuild(t *testing.T) (string, string) {
	rcFile := env("CARVE_E2E_UPSTREAM_BUILD_RC")
	deadline := time.Now().Add(40 * time.Minute)
	for {
		b, err := os.ReadFile(rcFile)
		if err == nil && strings.TrimSpace(string(b)) == "0" {
			break
		}
		if err == nil {
			t.Fatalf("building the upstream suite failed (exit %s): see %s", strings.TrimSpace(string(b)),
				filepath.Join(x.logs, "upstream-build.log"))
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upstream suite's build did not finish: see %s", filepath.Join(x.logs, "upstream-build.log"))
		}
		time.Sleep(5 * time.Second)
	}
	return filepath.Join(x.kbin, "e2e.test"), env("CARVE_E2E_UPSTREAM_IMAGES")
}

// importUpstreamImages imports the suite's images (busybox, agnhost under
// the references e2e.test names) into every node's containerd, as the run
// started with the others.
func (x *harness) importUpstreamImages(dir string) error {
	// The suite's images alone: Carve's came with the install.
	archives := map[string]string{}
	if err := refArchives(archives, dir); err != nil {
		return err
	}
	start := time.Now()
	staged := filepath.Join(x.work, "upstream-images")
	if err := stageImages(staged, archives); err != nil {
		return err
	}
	if err := importImages(filepath.Join(x.work, "host", "containerd-state", "containerd.sock"), staged); err != nil {
		return fmt.Errorf("host node: %w", err)
	}
	const vmSock = "/run/carve-containerd/containerd.sock"
	for name := range archives {
		base := filepath.Join(staged, name)
		script := `ctr -a "$1" -n k8s.io images import "$2.tar" >/dev/null || exit 1
name=$(cat "$2.name")
for ref in $(cat "$2.ref"); do
	[ "$ref" = "$name" ] || ctr -a "$1" -n k8s.io images tag --force "$name" "$ref" >/dev/null || exit 1
done`
		for _, node := range lvmNodes() {
			if _, err := x.vmOf(node).sh("sh", "-c", script, "sh", vmSock, base); err != nil {
				return fmt.Errorf("%s: %w", node, err)
			}
		}
	}
	logf("upstream images imported on every node in %s", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// runUpstream runs e2e.test on the cluster with one driver file, its
// output in the logs, and reads the result from its JUnit report. The
// ginkgo CLI runs the specs on upstreamProcs() processes at once, as the
// Kubernetes project runs its e2e (hack/ginkgo-e2e.sh): one spec at a time
// left both the machine and the VM node mostly idle, waiting on pods,
// attachments and the suite's polls. The suite's [Serial] specs still run
// alone, at the end.
func (x *harness) runUpstream(e2eTest string, d upstreamDriver) (*upstreamResult, error) {
	reportDir := filepath.Join(x.logs, "upstream-"+d.name)
	if err := os.MkdirAll(reportDir, 0o755); err != nil {
		return nil, err
	}
	focus := `External.Storage`
	if len(d.focus) > 0 {
		focus += `.*(` + strings.Join(d.focus, "|") + `)`
	}
	args := []string{
		"--procs=" + fmt.Sprint(upstreamProcs()), "--timeout=12h", "--no-color", "-v", "--silence-skips",
		"--focus=" + focus, "--skip=" + upstreamSkipRegexp(), e2eTest, "--",
		"--provider=skeleton", "--kubeconfig=" + x.adminKC,
		"--storage.testdriver=" + filepath.Join(x.repo, d.file),
		"--kubectl-path=" + filepath.Join(x.kbin, "kubectl"), "--report-dir=" + reportDir,
	}
	logFile, err := os.Create(d.log(x.logs))
	if err != nil {
		return nil, err
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.Command(filepath.Join(x.kbin, "ginkgo"), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	logf("upstream %s: ginkgo %s", d.name, strings.Join(args, " "))
	runErr := cmd.Run()
	r, err := readJUnit(filepath.Join(reportDir, "junit_01.xml"))
	if err != nil {
		return nil, fmt.Errorf("e2e.test: %v; its report: %w (log: %s)", runErr, err, d.log(x.logs))
	}
	// e2e.test exits non-zero when a spec fails: the report says which.
	if runErr != nil && len(r.failed) == 0 {
		return r, fmt.Errorf("e2e.test: %w with no failed spec in its report (log: %s)", runErr, d.log(x.logs))
	}
	return r, nil
}

// upstreamProcs is how many specs of the upstream suite run at once:
// CARVE_E2E_UPSTREAM_PROCS, 3 by default. Each spec mostly waits; three
// keep the single-core VM node busy without starving it (test/README.md
// has the measurements).
func upstreamProcs() int {
	n, err := strconv.Atoi(os.Getenv("CARVE_E2E_UPSTREAM_PROCS"))
	if err != nil || n < 1 {
		return 3
	}
	return n
}

// waitVolumesDeletedSince waits until Carve has deleted every volume and
// snapshot made since start: the suite deletes its claims as each spec ends, but does not
// wait for the volumes (Carve's DeleteVolume, then the node agent's
// lvremove), so the last spec's may still be going. A volume still there
// at the timeout is a volume Carve failed to delete.
func (x *harness) waitVolumesDeletedSince(start time.Time, timeout time.Duration) error {
	// Object timestamps have whole seconds.
	since := start.Truncate(time.Second)
	var left []string
	err := x.waitFor("the upstream suite's volumes to be deleted", timeout, func(ctx context.Context) (bool, error) {
		left = nil
		var pvs corev1.PersistentVolumeList
		if err := x.kc.List(ctx, &pvs); err != nil {
			return false, err
		}
		for _, pv := range pvs.Items {
			if pv.Spec.CSI != nil && pv.Spec.CSI.Driver == driverName && !pv.CreationTimestamp.Time.Before(since) {
				left = append(left, "PV "+pv.Name+" ("+string(pv.Status.Phase)+")")
			}
		}
		var lvs v1alpha1.LogicalVolumeList
		if err := x.kc.List(ctx, &lvs); err != nil {
			return false, err
		}
		for _, lv := range lvs.Items {
			if !lv.CreationTimestamp.Time.Before(since) {
				left = append(left, "LogicalVolume "+lv.Name)
			}
		}
		var snaps v1alpha1.LogicalVolumeSnapshotList
		if err := x.kc.List(ctx, &snaps); err != nil {
			return false, err
		}
		for _, s := range snaps.Items {
			if !s.CreationTimestamp.Time.Before(since) {
				left = append(left, "LogicalVolumeSnapshot "+s.Name)
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%w; still there: %s", err, strings.Join(left, ", "))
	}
	return nil
}
