//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A claim's VolumeAttributesClass changed while its pod writes
// (ModifyVolume through csi-resizer): deploy/'s example classes
// carve-linear and carve-raid1 turn the running volume into raid1 with a
// leg on the VM node's other disk and back, online; then carve-writecache
// puts a dm-writecache on the disk tagged carve-fast in front of it and
// carve-nocache takes it away, written back. After each change the
// LV's layout is what the class says, the claim's status names the class,
// and the writer's log, a sequence synced line by line, has no line lost,
// then and in a new pod after the volume was torn down.
func TestModifyVolumeClass(t *testing.T) {
	fullRunOnly(t)
	t.Parallel()
	claim := pvc("morph", "carve-thick", "128Mi")
	linear := "carve-linear"
	claim.Spec.VolumeAttributesClassName = &linear
	create(t, claim)
	p := runPodWith(t, "morph-1", "morph", func(p *corev1.Pod) {
		onNode(vmNode)(p) // where vmOut looks
		appendLines(p)
	})
	pvName := boundClaim(t, "morph").Spec.VolumeName
	lines := func() int {
		t.Helper()
		return checkSequence(t, readData(t, p, "log"))
	}
	wait(t, "the writer under way", time.Minute, func(context.Context) (bool, error) { return lines() > 5, nil })
	waitClass(t, "morph", linear)
	checkLayout(t, pvName, "linear", 1)

	for _, step := range []struct {
		class, segtype string
		devices        int
	}{{"carve-raid1", "raid1", 2}, {linear, "linear", 1}, {"carve-writecache", "writecache", 0}, {"carve-nocache", "linear", 1}} {
		before := lines()
		start := time.Now()
		setClass(t, "morph", step.class)
		waitClass(t, "morph", step.class)
		t.Logf("%s: claim at %s after %s, the writer at line %d (%d before)",
			pvName, step.class, time.Since(start).Round(time.Second), lines(), before)
		if step.segtype == "writecache" {
			checkCache(t, pvName, "/dev/vdb")
		} else {
			checkLayout(t, pvName, step.segtype, step.devices)
		}
		now := lines()
		wait(t, "the writer still writing", time.Minute, func(context.Context) (bool, error) { return lines() > now, nil })
	}

	written := lines()
	deletePod(t, "morph-1")
	waitDetached(t, pvName, "after the changes")
	r := runPod(t, "morph-2", "morph")
	if n := checkSequence(t, readData(t, r, "log")); n < written {
		t.Errorf("the volume holds %d lines, the writer had written %d", n, written)
	}
	deletePod(t, "morph-2")
	deleteClaim(t, "morph")
}

// setClass points claim name at the VolumeAttributesClass class.
func setClass(t *testing.T, name, class string) {
	t.Helper()
	ctx := context.Background()
	var c corev1.PersistentVolumeClaim
	if err := get(ctx, name, &c); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.VolumeAttributesClassName = &class
	if err := h.kc.Patch(ctx, &c, patch); err != nil {
		t.Fatal(err)
	}
}

// waitClass waits until the claim's status says its volume is in class:
// csi-resizer writes it once ControllerModifyVolume succeeded.
func waitClass(t *testing.T, name, class string) {
	t.Helper()
	var state string
	err := h.waitFor("claim "+name+" at class "+class, 5*time.Minute, func(ctx context.Context) (bool, error) {
		var c corev1.PersistentVolumeClaim
		if err := get(ctx, name, &c); err != nil {
			return false, err
		}
		cur := c.Status.CurrentVolumeAttributesClassName
		state = fmt.Sprintf("current class %v, modify status %+v, conditions %+v", strOrNil(cur), c.Status.ModifyVolumeStatus, c.Status.Conditions)
		return cur != nil && *cur == class && c.Status.ModifyVolumeStatus == nil, nil
	})
	if err != nil {
		t.Fatalf("%v: %s", err, state)
	}
}

// checkLayout checks the LV's segment type and how many PVs its data
// lives on, as lvs on the VM node reports them (raid1's legs: one each).
func checkLayout(t *testing.T, lvName, segtype string, pvCount int) {
	t.Helper()
	out := vmOut(t, "lvs", "--noheadings", "-o", "segtype", "e2e/"+lvName)
	if got := strings.TrimSpace(out); got != segtype {
		t.Errorf("LV %s: segtype %q, want %q", lvName, got, segtype)
	}
	// -a lists raid1's hidden images, each with the PV it is on; a linear
	// LV is its own one line.
	out = vmOut(t, "lvs", "-a", "--noheadings", "-o", "lv_name,devices", "e2e")
	pvs := map[string]bool{}
	for _, l := range nonEmptyLines(out) {
		f := strings.Fields(l)
		if len(f) == 2 && strings.Contains(f[0], lvName) && strings.HasPrefix(f[1], "/dev/") {
			pvs[strings.SplitN(f[1], "(", 2)[0]] = true
		}
	}
	if len(pvs) != pvCount {
		t.Errorf("LV %s: data on PVs %v, want %d of them (lvs: %q)", lvName, pvs, pvCount, out)
	}
}

// checkCache checks that the LV has a write cache, and that its cache
// lies on pv (the PV the class names by its tag), as lvs on the VM node
// reports them.
func checkCache(t *testing.T, lvName, pv string) {
	t.Helper()
	if got := strings.TrimSpace(vmOut(t, "lvs", "--noheadings", "-o", "segtype", "e2e/"+lvName)); got != "writecache" {
		t.Errorf("LV %s: segtype %q, want writecache", lvName, got)
	}
	out := vmOut(t, "lvs", "-a", "--noheadings", "-o", "lv_name,devices", "e2e")
	for _, l := range nonEmptyLines(out) {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "["+lvName+"_wcache_cvol]" {
			if !strings.HasPrefix(f[1], pv+"(") {
				t.Errorf("LV %s: cache on %s, want %s", lvName, f[1], pv)
			}
			return
		}
	}
	t.Errorf("LV %s: no cache in lvs: %q", lvName, out)
}

func strOrNil(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
