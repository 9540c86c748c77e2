//go:build vmtest

package lifecycle

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"carve.dev/carve/driver/iolimit"
	"carve.dev/carve/driver/mapper"
	"carve.dev/carve/driver/nodefs"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/test/csiflow"
	"carve.dev/carve/test/testenv"
)

// TestIOLimits: a volume's IO limits hold for the pod that uses it, on
// the real kernel's io controller: carve runs with a kubelet-like root,
// the pod's cgroup is where kubelet's cgroupfs driver puts it, and dd,
// started in that cgroup, writes through the published filesystem with
// direct IO. A write limit from the StorageClass holds within 10 % once
// published; ControllerModifyVolume changes it on the live volume (the
// pod's io.max follows, and so does dd's rate), and lifts it (dd runs far
// faster); a publish with limits to a path that is no pod's is refused.
func TestIOLimits(t *testing.T) {
	kubelet := t.TempDir()
	e := newEnv(t, []string{testenv.Disk(t, "CARVE_TEST_DISK")}, kubelet, "--path-root="+kubelet)
	ctx := context.Background()
	const uid = "3b9ac3f1-5e1c-4f7a-9d0e-2a6b8c4d1e7f"
	pod := testenv.PodCgroup(t, uid)

	const first = 4 * mib
	v, err := e.c.Create(ctx, "pvc-io", 96*mib, map[string]string{"writeBytesPerSecond": "4Mi"}, csiflow.MountCap(snw, "ext4"))
	must(t, err)
	staging := filepath.Join(kubelet, "plugins/kubernetes.io/csi/lvm.carve.dev/io/globalmount")
	target := filepath.Join(kubelet, "pods", uid, "volumes/kubernetes.io~csi/pvc-io/mount")
	for _, d := range []string{staging, filepath.Dir(target)} {
		must(t, os.MkdirAll(d, 0o750))
	}
	must(t, v.Up(ctx, node, staging, target))
	t.Cleanup(func() { _ = v.Down(ctx, target) })
	// The pod's I/O goes to the device its filesystem is on: the layer
	// over the LV (driver/mapper), where the limits go.
	rdev, err := nodefs.DeviceNumber(mapper.Path(layerOf(t, v)))
	must(t, err)
	wantIOMax(t, pod, rdev, volume.IOLimits{WriteBPS: first})
	wantRate(t, pod, target, first)

	const second = 8 * mib
	must(t, e.modifyParams(v, map[string]string{"writeBytesPerSecond": "8Mi", "readIOPS": "500"}))
	wantIOMax(t, pod, rdev, volume.IOLimits{WriteBPS: second, ReadIOPS: 500})
	wantRate(t, pod, target, second)

	must(t, e.modifyParams(v, map[string]string{"writeBytesPerSecond": "0", "readIOPS": "0"}))
	wantIOMax(t, pod, rdev, volume.IOLimits{})
	if rate := ddRate(t, pod, target, 48*mib); rate < 3*second {
		t.Errorf("limits lifted: dd wrote %.1f MiB/s, want well above the former %d MiB/s", rate/mib, second/mib)
	}

	// Limits on a volume whose pod cannot be told: refused, nothing mounted.
	must(t, e.modifyParams(v, map[string]string{"writeBytesPerSecond": "1Mi"}))
	other := filepath.Join(kubelet, "not-a-pod")
	err = v.Publish(ctx, other, false)
	wantCode(t, "publish with limits to a path that is no pod's", err, codes.FailedPrecondition)
	if mounts, _ := nodefs.MountsOf(rdev); len(mounts) != 2 {
		t.Errorf("mounts of the volume after the refused publish: %v, want its staging and target only", mounts)
	}
}

// modifyParams is ControllerModifyVolume with params.
func (e *env) modifyParams(v *csiflow.Volume, params map[string]string) error {
	_, err := e.c.Controller.ControllerModifyVolume(context.Background(), &csi.ControllerModifyVolumeRequest{
		VolumeId: v.ID, MutableParameters: params})
	return err
}

// wantIOMax checks the kernel's io.max of the pod for the device.
func wantIOMax(t *testing.T, pod string, rdev uint64, want volume.IOLimits) {
	t.Helper()
	got, err := iolimit.Read(pod, rdev)
	if err != nil || got != want {
		b, _ := os.ReadFile(filepath.Join(pod, "io.max"))
		t.Fatalf("io.max of the pod: %+v, %v (file: %q); want %+v", got, err, b, want)
	}
}

// wantRate checks that dd in the pod writes at the limit, within 10 %:
// never above (the kernel's throttle); below only on a starved machine,
// so the best of three tries counts there.
func wantRate(t *testing.T, pod, dir string, limit float64) {
	t.Helper()
	best := 0.0
	for range 3 {
		rate := ddRate(t, pod, dir, int64(6*limit))
		if rate > 1.1*limit {
			t.Fatalf("dd wrote %.2f MiB/s under a limit of %.2f MiB/s", rate/mib, limit/mib)
		}
		best = max(best, rate)
		if best >= 0.9*limit {
			t.Logf("dd under a limit of %.0f MiB/s: %.2f MiB/s (%+.1f %%)", limit/mib, best/mib, 100*(best/limit-1))
			return
		}
	}
	t.Fatalf("dd wrote at best %.2f MiB/s under a limit of %.2f MiB/s", best/mib, limit/mib)
}

// ddRate is the rate, in bytes per second, at which dd started in cgroup
// pod writes n bytes to a new file in dir with direct IO, synced.
func ddRate(t *testing.T, pod, dir string, n int64) float64 {
	t.Helper()
	cg, err := os.Open(pod)
	must(t, err)
	defer func() { _ = cg.Close() }()
	f := filepath.Join(dir, "dd")
	_ = os.Remove(f)
	cmd := exec.Command("dd", "if=/dev/zero", "of="+f, "bs=1M", fmt.Sprintf("count=%d", n/mib), "oflag=direct", "conv=fsync")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd())}
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dd: %v: %s", err, out)
	}
	return float64(n) / time.Since(start).Seconds()
}
