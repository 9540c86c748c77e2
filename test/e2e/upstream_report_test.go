package e2e

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// A report in the shape e2e.test (Ginkgo v2) writes: the suite's own nodes,
// specs the focus left out ("skipped"), a spec that skipped itself, and
// specs that passed, failed and were interrupted.
const sampleJUnit = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="8" disabled="2" errors="1" failures="1" time="401.1">
  <testsuite name="Kubernetes e2e suite" tests="8" skipped="2" errors="1" failures="1" time="401.1">
    <testcase name="[ReportBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="0.1"></testcase>
    <testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="2.0"></testcase>
    <testcase name="[It] External Storage [Driver: lvm.carve.dev] [Testpattern: Dynamic PV (ntfs)] volumes should store data" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
    <testcase name="[It] [sig-network] DNS should work" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
    <testcase name="[It] External Storage [Driver: lvm.carve.dev] [Testpattern: Dynamic PV (default fs)] volume-modify should modify" classname="Kubernetes e2e suite" status="skipped" time="0.2">
      <skipped message="skipped - Driver lvm.carve.dev does not support VolumeAttributesClass"></skipped>
    </testcase>
    <testcase name="[It] External Storage [Driver: lvm.carve.dev] [Testpattern: Dynamic PV (default fs)] capacity provides storage capacity information" classname="Kubernetes e2e suite" status="passed" time="2.1"></testcase>
    <testcase name="[It] External Storage [Driver: lvm.carve.dev] [Testpattern: Dynamic PV (ext4)] volumes should store data" classname="Kubernetes e2e suite" status="failed" time="55.8">
      <failure message="" type="failed">[FAILED] writing the contents</failure>
    </testcase>
    <testcase name="[It] External Storage [Driver: lvm.carve.dev] [Testpattern: Dynamic PV (default fs)] read-write-once-pod should block" classname="Kubernetes e2e suite" status="interrupted" time="93.8">
      <error message="interrupted" type="interrupted"></error>
    </testcase>
    <testcase name="[SynchronizedAfterSuite]" classname="Kubernetes e2e suite" status="failed" time="1.5">
      <failure message="" type="failed">cleanup failed</failure>
    </testcase>
    <testcase name="[ReportAfterSuite] Kubernetes e2e suite report" classname="Kubernetes e2e suite" status="passed" time="1.2"></testcase>
  </testsuite>
</testsuites>
`

// readSample reads sampleJUnit as e2e.test's report.
func readSample(t *testing.T) *upstreamResult {
	t.Helper()
	path := filepath.Join(t.TempDir(), "junit_01.xml")
	if err := os.WriteFile(path, []byte(sampleJUnit), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := readJUnit(path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestReadJUnitCountsSpecsByEndState(t *testing.T) {
	r := readSample(t)
	want := &upstreamResult{
		passed: 1, // the suite's own nodes that passed are not specs
		// Only the spec that skipped itself; the focus left out the others.
		skipped: []string{"[It] External Storage [Driver: lvm.carve.dev] [Testpattern: Dynamic PV (default fs)] " +
			"volume-modify should modify: skipped - Driver lvm.carve.dev does not support VolumeAttributesClass"},
		failed: []string{
			"failed: [It] External Storage [Driver: lvm.carve.dev] [Testpattern: Dynamic PV (ext4)] volumes should store data",
			"failed: [SynchronizedAfterSuite]", // a suite node counts when it fails
			"interrupted: [It] External Storage [Driver: lvm.carve.dev] [Testpattern: Dynamic PV (default fs)] read-write-once-pod should block",
		},
		// What the focus selected, whatever its end: not the suite's
		// nodes, not what the focus left out.
		ran: []string{
			"[It] External Storage [Driver: lvm.carve.dev] [Testpattern: Dynamic PV (default fs)] volume-modify should modify",
			"[It] External Storage [Driver: lvm.carve.dev] [Testpattern: Dynamic PV (default fs)] capacity provides storage capacity information",
			"[It] External Storage [Driver: lvm.carve.dev] [Testpattern: Dynamic PV (ext4)] volumes should store data",
			"[It] External Storage [Driver: lvm.carve.dev] [Testpattern: Dynamic PV (default fs)] read-write-once-pod should block",
		},
	}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("readJUnit = %+v, want %+v", r, want)
	}
	if got := r.String(); got != "1 passed, 3 failed, 1 skipped" {
		t.Errorf("String() = %q", got)
	}
}

func TestReadJUnitRefusesWhatIsNoReport(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.xml")
	if err := os.WriteFile(bad, []byte("<testsuites><testsuite>"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{bad, filepath.Join(dir, "missing.xml")} {
		if r, err := readJUnit(p); err == nil {
			t.Errorf("readJUnit(%s) = %+v, want an error", filepath.Base(p), r)
		}
	}
}

// A selection entry that selected no spec is reported, whatever the other
// entries did; one that selected a spec that then failed or skipped itself
// is not (those have their own reports).
func TestUnmatchedSelectionEntries(t *testing.T) {
	r := readSample(t)
	entries := []string{
		`capacity provides storage capacity information`,
		`\(ext4\)\] volumes should store data$`,         // failed: selected all the same
		`volume-modify should modify`,                   // skipped itself
		`\(ntfs\)\] volumes should store data`,          // left out by the focus
		`volume-modify should create a volume with VAC`, // no such spec
		`DNS should work`,                               // not an External Storage spec
		`(`,                                             // no regexp
	}
	got := r.unmatched(entries)
	want := []string{entries[3], entries[4], entries[5], "( (error parsing regexp: missing closing ): `External.Storage.*(()`)"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("unmatched = %q\nwant %q", got, want)
	}
	if got := r.unmatched(entries[:3]); got != nil {
		t.Errorf("unmatched of entries that all selected a spec = %q", got)
	}
}
