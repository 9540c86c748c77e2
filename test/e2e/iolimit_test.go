//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/mapper"
)

// A claim's IO limits changed while its pod runs (IO limits
// through csi-resizer's ModifyVolume): deploy/'s example class
// carve-throttled puts its limits into the pod's own cgroup on the VM node
// (kubelet's cgroupfs driver, kubepods/<qos>/pod<UID>), as the line of
// io.max for the device its filesystem is on (the layer over its LV), and the LogicalVolume's status says so;
// carve-unthrottled removes the line. A second pod started on the claim
// while it is throttled gets the limits at its publish.
func TestIOLimitsClass(t *testing.T) {
	fullRunOnly(t)
	t.Parallel()
	create(t, pvc("throttle", "carve-thick", "64Mi"))
	first := runPodWith(t, "throttle-1", "throttle", onNode(vmNode)) // vmOut's node
	pvName := boundClaim(t, "throttle").Spec.VolumeName
	// The pod's I/O goes to the device its filesystem is on: the layer
	// over the LV (driver/mapper), where the limits go.
	layer, err := mapper.Name("e2e", pvName, mapper.LinearLayer)
	if err != nil {
		t.Fatal(err)
	}
	dev := strings.TrimSpace(vmOut(t, "dmsetup", "info", "-c", "--noheadings", "--separator", ":", "-o", "major,minor", layer))
	throttled := dev + " rbps=104857600 wbps=52428800 riops=max wiops=2000"

	setClass(t, "throttle", "carve-throttled")
	waitClass(t, "throttle", "carve-throttled")
	if got := podIOMax(t, string(first.UID), dev); got != throttled {
		t.Errorf("io.max of pod throttle-1 for %s: %q, want %q", dev, got, throttled)
	}
	var lv v1alpha1.LogicalVolume
	if err := get(context.Background(), pvName, &lv); err != nil {
		t.Fatal(err)
	}
	want := v1alpha1.IOLimits{ReadBytesPerSecond: 100 << 20, WriteBytesPerSecond: 50 << 20, WriteIOPS: 2000}
	if lv.Status.IOLimits != want {
		t.Errorf("LogicalVolume %s: status.ioLimits %+v, want %+v", pvName, lv.Status.IOLimits, want)
	}
	second := runPod(t, "throttle-2", "throttle")
	if got := podIOMax(t, string(second.UID), dev); got != throttled {
		t.Errorf("io.max of pod throttle-2, published while throttled: %q, want %q", got, throttled)
	}

	setClass(t, "throttle", "carve-unthrottled")
	waitClass(t, "throttle", "carve-unthrottled")
	for _, p := range []string{string(first.UID), string(second.UID)} {
		if got := podIOMax(t, p, dev); got != "" {
			t.Errorf("io.max of pod %s after the limits were lifted: %q, want no line for %s", p, got, dev)
		}
	}
	deletePod(t, "throttle-1")
	deletePod(t, "throttle-2")
	deleteClaim(t, "throttle")
}

// podIOMax is the line of io.max for device dev (MAJ:MIN) in the cgroup of
// pod uid on the VM node, "" when it has none.
func podIOMax(t *testing.T, uid, dev string) string {
	t.Helper()
	script := `for f in /sys/fs/cgroup/kubepods/pod$1/io.max /sys/fs/cgroup/kubepods/*/pod$1/io.max; do
	[ -f "$f" ] && { grep "^$2 " "$f"; exit 0; }
done
echo "no cgroup of pod $1" >&2; exit 1`
	return strings.TrimSpace(vmOut(t, "sh", "-c", script, "sh", uid, dev))
}
