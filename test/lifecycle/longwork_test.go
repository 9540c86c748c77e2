//go:build vmtest

package lifecycle

import (
	"context"
	"testing"
	"time"

	"carve.dev/carve/test/csiflow"
	"carve.dev/carve/test/testenv"
)

// TestDeleteOutlivesCommandTimeout deletes a thick volume whose zeroing
// takes longer than --command-timeout: the wipe is data work, bounded by a
// deadline sized for the volume, while lvm's metadata commands keep the
// short timeout. Carve runs in a cgroup that throttles writes to the VG's
// disks, since the VM's own disks zero 3 GiB in about 0.1 s (write-zeroes
// becomes a hole punch on the host); 128 MiB at 16 MiB/s takes about 8 s.
// The timeout stays above what lvm commands take in the VM (up to about
// 1.5 s on a busy host).
func TestDeleteOutlivesCommandTimeout(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	const size, rate, cmdTimeout = 128 * mib, 16 * mib, 3 * time.Second
	slow := testenv.SlowCgroup(t, rate, e.disks...)
	c := dial(t, testenv.StartCarve(t, testenv.Options{Cgroup: slow}, "--volume-groups="+vg, "--node-id="+node,
		"--command-timeout="+cmdTimeout.String()).Endpoint)
	v, err := c.Create(ctx, "pvc-slow-wipe", size, nil, csiflow.BlockCap(snw))
	must(t, err)
	start := time.Now()
	must(t, v.Delete(ctx))
	took := time.Since(start)
	if took < cmdTimeout {
		t.Fatalf("delete took %v, less than the %v command timeout: the throttle did not slow the wipe, so this proves nothing", took, cmdTimeout)
	}
	if _, ok := e.lv(v); ok {
		t.Fatal("LV still there after DeleteVolume")
	}
	t.Logf("deleted a %d MiB volume in %v with --command-timeout=%v", size/mib, took.Round(time.Millisecond), cmdTimeout)
}
