//go:build vmtest

// Package crash kills `carve standalone` between every two steps of every
// multi-step operation, on real LVM in the test VM, and checks that the
// CO's retry ends exactly where an uninterrupted call ends: the same LVs
// with the same sizes, tags and activation, the same free space, the same
// mounts, the data intact and no filesystem made twice.
//
// The kill comes from carve itself: a binary built with the tag
// crashpoints (driver/crashpoint) and started with CARVE_CRASH=Method:N
// SIGKILLs itself right after the Nth command of a call of Method. For each
// operation the suite raises N from 1 until the call ends before the Nth
// command: then every point between its steps has been hit.
package crash

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"carve.dev/carve/lvm"
	"carve.dev/carve/test/csiflow"
	"carve.dev/carve/test/fixture"
	"carve.dev/carve/test/testenv"
)

const (
	vg   = "crashvg"
	node = "crash-node"
	pool = "pool"
	mib  = 1 << 20
)

// env is one operation's test bed: the VG, the carve binary, a directory
// for staging and target paths.
type env struct {
	t     *testing.T
	lvm   *lvm.Client
	bin   string
	sock  string
	dir   string
	disks []string
	proc  *testenv.Process
	c     *csiflow.Client
}

// start runs carve, armed at CARVE_CRASH=crash when crash is not empty.
func (e *env) start(crash string) {
	e.t.Helper()
	e.stop() // a crashed one's client and process
	var extra []string
	if crash != "" {
		extra = append(extra, "CARVE_CRASH="+crash)
	}
	e.proc = testenv.Launch(e.t, testenv.Options{Bin: e.bin, Socket: e.sock, Env: extra},
		"--volume-groups="+vg, "--node-id="+node, "--path-root="+e.dir)
	c, err := csiflow.Dial(e.proc.Endpoint)
	if err != nil {
		e.t.Fatal(err)
	}
	e.c = c
}

func (e *env) stop() {
	if e.c != nil {
		_ = e.c.Close()
		e.c = nil
	}
	if e.proc != nil {
		e.proc.Stop()
		e.proc = nil
	}
}

// reset brings the VG back to its base state: no volume, an empty thin
// pool, nothing mounted.
func (e *env) reset() {
	e.t.Helper()
	e.stop()
	testenv.UnmountAll(e.t, e.dir, 0)
	if err := testenv.CloseMappings(vg); err != nil {
		e.t.Fatalf("reset: %v", err)
	}
	ctx := context.Background()
	lvs, err := e.lvm.ListLVs(ctx, vg)
	if err != nil {
		e.t.Fatal(err)
	}
	// Snapshots first: lvm2 will not remove an origin that has them.
	sort.SliceStable(lvs, func(i, j int) bool { return lvs[i].Origin != "" && lvs[j].Origin == "" })
	for _, lv := range lvs {
		if lv.Name == pool {
			continue
		}
		if err := e.lvm.RemoveLV(ctx, vg, lv.Name); err != nil && !strings.Contains(err.Error(), "not found") {
			e.t.Fatalf("reset: %v", err)
		}
	}
}

func setup(t *testing.T) *env {
	t.Helper()
	bin := os.Getenv("CARVE_CRASH_BIN")
	if bin == "" {
		fixture.Missing(t, "CARVE_CRASH_BIN is not set: build cmd/carve with -tags crashpoints (scripts/test-vm.sh does)")
	}
	disks := []string{testenv.Disk(t, "CARVE_TEST_DISK")}
	if d := os.Getenv("CARVE_TEST_DISK2"); d != "" {
		disks = append(disks, d)
	}
	l := testenv.PrivateLVM(t)
	testenv.NewVG(t, l, vg, disks...)
	if _, err := l.CreateThinPool(context.Background(), vg, pool, 128*mib); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := &env{t: t, lvm: l, bin: bin, sock: filepath.Join(dir, "csi.sock"), dir: dir, disks: disks}
	t.Cleanup(func() {
		e.stop()
		testenv.UnmountAll(t, dir, 0)
		e.reset()
	})
	return e
}

// retry calls fn as a CO does: again while the answer says to come back
// and carve is alive.
func retry(alive func() bool, fn func() error) error {
	var err error
	for range 120 {
		err = fn()
		switch status.Code(err) {
		case codes.Aborted, codes.Unavailable, codes.DeadlineExceeded:
			if !alive() {
				return err
			}
			time.Sleep(time.Second)
			continue
		}
		return err
	}
	return fmt.Errorf("still retrying after 120 attempts: %w", err)
}

// alive tells whether the carve under test still runs.
func (e *env) alive() bool { return e.proc != nil && !e.proc.Exited(0) }

func (e *env) path(name string) string { return filepath.Join(e.dir, name) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
