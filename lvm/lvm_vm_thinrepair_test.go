//go:build vmtest

package lvm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestVMThinCutCreateIsRepaired sends a thin pool the messages a cut
// thin lvcreate -s sent (lvm2 2.03.16 sends create_snap, then
// set_transaction_id, then commits its metadata) and checks that the
// thin creates that lvm2 alone then refuses or gets wrong succeed: a
// snapshot that reads its origin's data, and new thin LVs that read
// zeroes, not the data of the device the cut command made (lvm2's
// create_thin takes a device the kernel already has as its own).
func TestVMThinCutCreateIsRepaired(t *testing.T) {
	c, r := vmClient(t)
	ctx := context.Background()
	if _, err := c.CreateThinPool(ctx, vmVG, "pool0", 64<<20); err != nil {
		t.Fatal(err)
	}
	o, err := c.CreateLV(ctx, CreateLVOptions{VG: vmVG, Name: "o", Size: 8 << 20, ThinPool: "pool0"})
	if err != nil {
		t.Fatal(err)
	}
	writePattern(t, o.Path, 3)
	cut := func(setTransaction bool) {
		t.Helper()
		st, err := c.readThinPool(ctx, vmVG, "pool0")
		if err != nil {
			t.Fatal(err)
		}
		next, oid := uint64(0), uint64(0)
		for id, lv := range st.lvByID {
			next = max(next, id)
			if lv == "o" {
				oid = id
			}
		}
		msgs := []string{fmt.Sprintf("create_snap %d %d", next+1, oid)}
		if setTransaction {
			msgs = append(msgs, fmt.Sprintf("set_transaction_id %d %d", st.kernel, st.kernel+1))
		}
		for _, m := range msgs {
			if out, err := exec.Command("dmsetup", "message", st.tpool, "0", m).CombinedOutput(); err != nil {
				t.Fatalf("dmsetup message %s: %v: %s", m, err, out)
			}
		}
	}
	// lvm2 alone refuses, each time with what runThinCreate recognises.
	refused := func(args ...string) {
		t.Helper()
		_, err := c.run(ctx, args...)
		if _, found := thinLeftover(err); !found {
			t.Fatalf("lvm2's %s after the cut: %v; want a leftover's failure", args[0], err)
		}
	}

	cut(false)
	refused("lvcreate", "-s", "-kn", "-n", "raw", "--yes", vmVG+"/o")
	snap, err := c.CreateSnapshotOf(ctx, o, "snap1", SnapshotOptions{})
	if err != nil {
		t.Fatalf("snapshot after a cut one: %v", err)
	}
	if err := c.Activate(ctx, vmVG, "snap1"); err != nil {
		t.Fatal(err)
	}
	mustRead(t, snap.Path, 3)

	blank := func(name string) {
		t.Helper()
		lv, err := c.CreateLV(ctx, CreateLVOptions{VG: vmVG, Name: name, Size: 8 << 20, ThinPool: "pool0"})
		if err != nil {
			t.Fatalf("thin LV %s after a cut snapshot: %v", name, err)
		}
		got, err := os.ReadFile(lv.Path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, make([]byte, len(got))) {
			t.Fatalf("the new thin LV %s holds data (%q...): the cut snapshot's device was handed out", name, got[:16])
		}
	}
	cut(true)
	refused("lvcreate", "-n", "raw", "-V", "8m", "--thinpool", "pool0", "--yes", vmVG)
	blank("fresh")

	// A cut create_snap, then carve restarted: lvm2 alone would create
	// the next thin LV on the cut snapshot's device without a word.
	cut(false)
	c = New(r)
	blank("fresh2")

	st, err := c.readThinPool(ctx, vmVG, "pool0")
	if err != nil || st.kernel != st.metadata || len(st.lvByID) != 4 {
		t.Errorf("pool after the repairs: %+v, %v; want the ids agreeing and four thin LVs", st, err)
	}
	for _, name := range []string{"fresh2", "fresh", "snap1", "o"} {
		if err := c.RemoveLV(ctx, vmVG, name); err != nil {
			t.Error(err)
		}
	}
}

// TestVMThinPoolReadUnderTheLock reads a thin pool as the repair does,
// holding lvm2's VG lock shared while an lvcreate waits for it
// exclusively. A plain lvs waited for that lvcreate, which waited for the
// lock: the repair's read must not (measured: it hung carve until the
// runner's timeout).
func TestVMThinPoolReadUnderTheLock(t *testing.T) {
	c, r := vmClient(t)
	ctx := context.Background()
	if _, err := c.CreateThinPool(ctx, vmVG, "pool0", 16<<20); err != nil {
		t.Fatal(err)
	}
	unlock, err := c.lockVGShared(ctx, vmVG)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Run(ctx, "lvm", "lvcreate", "-n", "waiting", "-L", "4m", "--yes", vmVG)
		done <- err
	}()
	time.Sleep(2 * time.Second) // the lvcreate queues for the lock
	short, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = c.readThinPool(short, vmVG, "pool0")
	select {
	case err := <-done:
		t.Errorf("the lvcreate ran while the VG's lock was held shared: %v", err)
	default:
	}
	unlock()
	if err != nil {
		t.Errorf("reading the pool under the lock, an lvcreate waiting: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("the waiting lvcreate, once the lock was released: %v", err)
	}
}
