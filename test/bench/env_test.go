//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"carve.dev/carve/lvm"
	"carve.dev/carve/lvm/runner"
	"carve.dev/carve/test/bench/results"
	"carve.dev/carve/test/csiflow"
	"carve.dev/carve/test/testenv"
)

const (
	vg   = "benchvg"
	pool = "pool"
	node = "bench-node"
	mib  = 1 << 20
)

var snw = csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER

// env is the one VG, thin pool and carve process every section measures
// on, with the raw commands run through the same runner Carve uses.
type env struct {
	t       *testing.T // the running section's
	top     *testing.T // TestBench's
	cfg     config
	lvm     *lvm.Client
	run     *runner.Exec
	c       *csiflow.Client
	pid     int
	metrics string // carve's /metrics URL
	dir     string // staging and target paths, inside carve's --path-root
	res     *results.Run
	seq     atomic.Int64
}

// setup makes the VG on the scratch disks, a thin pool in it, and starts
// carve standalone on it with its metrics served on loopback. The VG is
// not removed: the VM and its disks are thrown away after the run, and
// removing a thousand volumes one by one would take longer than the run.
func setup(t *testing.T, cfg config) *env {
	t.Helper()
	disks := []string{testenv.Disk(t, "CARVE_TEST_DISK")}
	if d := os.Getenv("CARVE_TEST_DISK2"); d != "" {
		disks = append(disks, d)
	}
	l := testenv.PrivateLVM(t)
	ctx := context.Background()
	if err := l.CreateVG(ctx, vg, disks...); err != nil {
		t.Fatalf("create VG: %v", err)
	}
	if _, err := l.CreateThinPool(ctx, vg, pool, 4<<30); err != nil {
		t.Fatalf("create thin pool: %v", err)
	}
	addr := testenv.FreeLoopbackAddr(t)
	args := []string{"--volume-groups=" + vg, "--node-id=" + node, "--health-address=" + addr, "-v=2"}
	if cfg.shells != "" {
		args = append(args, "--lvm-shells="+cfg.shells)
	}
	p := testenv.StartCarve(t, testenv.Options{}, args...)
	c, err := csiflow.Dial(p.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &env{t: t, top: t, cfg: cfg, lvm: l, run: runner.New(0), c: c, pid: p.PID(),
		metrics: "http://" + addr + "/metrics", dir: t.TempDir(), res: &results.Run{Mode: cfg.mode(), Started: time.Now()}}
}

// name is a fresh LV / CSI name with prefix.
func (e *env) name(prefix string) string { return fmt.Sprintf("%s-%d", prefix, e.seq.Add(1)) }

// path is a fresh directory path under the paths carve accepts (it does
// not exist yet: NodeStage and NodePublish make their own).
func (e *env) path(prefix string) string { return filepath.Join(e.dir, e.name(prefix)) }

// cmd runs a raw command through the runner, as Carve runs its own.
func (e *env) cmd(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := e.run.Run(ctx, name, args...)
	if err != nil {
		return out, fmt.Errorf("raw %s: %w", runner.CommandLine(name, args), err)
	}
	return out, nil
}

// lvmCmd is `lvm args...`, the binary Carve's lvm client runs.
func (e *env) lvmCmd(ctx context.Context, args ...string) error {
	_, err := e.cmd(ctx, "lvm", args...)
	return err
}

// dataCmd runs a command whose time grows with the bytes it moves (mkfs,
// dd, fio): the runner's metadata timeout must not cut it.
func (e *env) dataCmd(name string, args ...string) ([]byte, error) {
	ctx, cancel := runner.DataWork(context.Background(), 30*time.Minute)
	defer cancel()
	return e.cmd(ctx, name, args...)
}

// rawLV creates an LV the way Carve's lvm client does for the type
// (lvm/create.go): thick zeroed at its start with signatures wiped, thin
// in the pool.
func (e *env) rawLV(ctx context.Context, name string, size int64, thin bool) error {
	sz := fmt.Sprintf("%db", size)
	if thin {
		return e.lvmCmd(ctx, "lvcreate", "-n", name, "-V", sz, "--thinpool", pool, "--yes", vg)
	}
	return e.lvmCmd(ctx, "lvcreate", "-n", name, "-L", sz, "--zero", "y", "--wipesignatures", "y", "--yes", vg)
}

func (e *env) rawRemove(ctx context.Context, name string) error {
	return e.lvmCmd(ctx, "lvremove", "--yes", vg+"/"+name)
}

// params are the StorageClass parameters of a thick or thin volume.
func params(thin bool) map[string]string {
	if thin {
		return map[string]string{"thinPool": pool}
	}
	return map[string]string{}
}

func kind(thin bool) string {
	if thin {
		return "thin"
	}
	return "thick"
}

// create is CreateVolume of a filesystem volume.
func (e *env) create(ctx context.Context, name string, size int64, thin bool, fs string) (*csiflow.Volume, error) {
	p := params(thin)
	if fs != "" {
		p["fsType"] = fs
	}
	return e.c.Create(ctx, name, size, p, csiflow.MountCap(snw, fs))
}

func (e *env) must(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

// device is the LV's device node.
func device(name string) string { return "/dev/" + vg + "/" + name }

// lvName is the LV of a volume or snapshot ID (node/vg/lv).
func lvName(id string) string { return filepath.Base(id) }

func mountCap() *csi.VolumeCapability { return csiflow.MountCap(snw, "") }
