package lvm

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/klog/v2"

	"carve.dev/carve/lvm/runner"
)

// What a cut thin lvm2 command leaves in its pool, and its repair.
//
// lvm2 makes a thin LV or thin snapshot under its VG lock in three steps:
// it writes the new metadata (precommitted), sends the pool's kernel
// device its messages (create_thin N or create_snap N origin, then
// set_transaction_id T T+1) and commits the metadata. N is the highest
// device id the metadata knows plus one. An lvremove sends delete N the
// same way. A SIGKILL between the steps (carve killed, its lvm2 children
// with it; or the runner's after its grace) leaves the kernel's pool ahead
// of the metadata. Measured with lvm2 2.03.16, sending the same messages
// by hand:
//
//   - After create_* alone, device N exists in the kernel and the
//     transaction ids agree. A thin snapshot picks N again and fails
//     ("already contain thin device with device_id N ... Manual
//     intervention may be required"): the soak saw a thin CreateSnapshot
//     fail so on every retry. A thin LV's create_thin N does not fail:
//     lvm2 takes the device as its own, and the new, supposedly blank
//     volume reads the cut snapshot's data: another volume's bytes.
//   - After set_transaction_id too, the kernel's id is T+1, the metadata's
//     T. lvm2 refuses to create in the pool ("unexpected transaction id
//     T+1, expecting T", then a misleading "free space ... reached
//     threshold"), and an lvremove in it skips its own messages (the ids
//     now match its new one), leaving its LV's device, with its data,
//     under an id a later create_thin takes.
//
// No LV has such a device: the metadata that would name it was never
// committed. So before a thin command's first run in a pool since carve
// started, or since a thin command of the pool was cut, checkThinPool
// puts the kernel's transaction id back to the metadata's and deletes
// device N = highest + 1 if the kernel has it, under lvm2's VG lock held
// shared, so that no lvm2 command of the VG is half way meanwhile. A
// failure that names a leftover (a cut command of someone else's) is
// repaired the same way, for the device it names if no LV has it, and the
// command runs again. A metadata ahead of the kernel is lvm2's own queue
// of messages (a create that failed with the pool inactive commits one,
// measured), which lvm2 sends itself: it is left alone.
var (
	thinTakenRe = regexp.MustCompile(`already contain thin device with device_id (\d+)`)
	thinAheadRe = regexp.MustCompile(`unexpected transaction id (\d+), expecting (\d+)`)
)

// thinAttempts bounds runThinCommand: a kill after set_transaction_id
// needs two repairs (the id, then the device).
const thinAttempts = 3

// thinGuard remembers the thin pools ("vg/pool") checked since this
// process started or since a thin command of theirs was cut.
type thinGuard struct {
	mu      sync.Mutex
	checked map[string]bool
}

func (g *thinGuard) isChecked(vg, pool string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.checked[vg+"/"+pool]
}

// forgetVG makes every pool of vg checked again before its next thin
// command: a command of vg was cut.
func (g *thinGuard) forgetVG(vg string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k := range g.checked {
		if strings.HasPrefix(k, vg+"/") {
			delete(g.checked, k)
		}
	}
}

func (g *thinGuard) markChecked(vg, pool string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.checked == nil {
		g.checked = map[string]bool{}
	}
	g.checked[vg+"/"+pool] = true
}

// runThinCommand runs an lvm2 command that sends vg/pool messages (a thin
// lvcreate or lvcreate -s, the lvremove of a thin LV): after the pool's
// check, and again after repairing a leftover its failure names. It is
// idempotent to repeat: the failures repaired come before any commit.
// With pool "" (a thick LV's command) it only runs the command.
func (c *Client) runThinCommand(ctx context.Context, vg, pool string, args []string) error {
	if pool == "" {
		_, err := c.run(ctx, args...)
		return err
	}
	if !c.thin.isChecked(vg, pool) {
		if err := c.checkThinPool(ctx, vg, pool); err != nil {
			return fmt.Errorf("check thin pool %s/%s for what a cut command left: %w", vg, pool, err)
		}
		c.thin.markChecked(vg, pool)
	}
	var err error
	for range thinAttempts {
		if _, err = c.run(ctx, args...); err == nil {
			return nil
		}
		if cut(err) {
			return err // run has forgotten the VG's pools: checked again next time
		}
		taken, found := thinLeftover(err)
		if !found {
			return err
		}
		if rerr := c.repairThinPool(ctx, vg, pool, taken, false); rerr != nil {
			return fmt.Errorf("%w (repairing thin pool %s/%s: %w)", err, vg, pool, rerr)
		}
	}
	return err
}

// thinLeftover tells a thin command's failure on a cut command's
// leftover, and the device id it found taken (0 when none was named;
// lvm2's ids start at 1).
func thinLeftover(err error) (taken uint64, found bool) {
	var rerr *runner.Error
	if !errors.As(err, &rerr) {
		return 0, false
	}
	if m := thinTakenRe.FindStringSubmatch(rerr.Stderr); m != nil {
		id, perr := strconv.ParseUint(m[1], 10, 32)
		return id, perr == nil && id > 0
	}
	return 0, thinAheadRe.MatchString(rerr.Stderr)
}

// thinPoolState is a thin pool's transaction ids, in the kernel and in
// lvm2's metadata, and which LV holds which device id.
type thinPoolState struct {
	tpool            string // the pool's thin-pool device (…-tpool, or the pool's own)
	kernel, metadata uint64
	lvByID           map[uint64]string
}

// next is the device id lvm2 gives the pool's next thin LV.
func (st thinPoolState) next() uint64 {
	var highest uint64
	for id := range st.lvByID {
		highest = max(highest, id)
	}
	return highest + 1
}

// checkThinPool repairs what a cut command may have left in vg/pool (see
// the comment at the top), activating the pool first if it is inactive:
// its kernel state is what is checked, and lvm2 activates it for any
// thin command anyway.
func (c *Client) checkThinPool(ctx context.Context, vg, pool string) error {
	err := c.repairThinPool(ctx, vg, pool, 0, true)
	if !errors.Is(err, errPoolInactive) {
		return err
	}
	if err := c.Activate(ctx, vg, pool); err != nil {
		return err
	}
	return c.repairThinPool(ctx, vg, pool, 0, true)
}

var errPoolInactive = errors.New("thin pool inactive")

// repairThinPool undoes, under lvm2's VG lock, what a cut thin command
// left in vg/pool: the kernel's transaction id one ahead of the
// metadata's, and device taken (0: none named) if no LV of the pool holds
// it. The device lvm2 would create next goes too if the kernel has it,
// when next is asked or a leftover was found.
func (c *Client) repairThinPool(ctx context.Context, vg, pool string, taken uint64, next bool) error {
	unlock, err := c.lockVGShared(ctx, vg)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := c.readThinPool(ctx, vg, pool)
	if err != nil {
		return err
	}
	reset := st.kernel == st.metadata+1
	switch {
	case reset:
		msg := fmt.Sprintf("set_transaction_id %d %d", st.kernel, st.metadata)
		if _, err := c.poolMessage(ctx, st.tpool, msg); err != nil {
			return err
		}
		klog.InfoS("Put a thin pool's transaction id back to its metadata's (an lvm2 command was cut after its messages)",
			"pool", vg+"/"+pool, "kernel", st.kernel, "metadata", st.metadata)
	case st.kernel != st.metadata:
		return nil // lvm2's queued messages: its next command sends them
	}
	if taken != 0 {
		if lv, ok := st.lvByID[taken]; ok {
			return fmt.Errorf("device id %d of the pool is LV %s's: not deleted", taken, lv)
		}
		if err := c.deleteThinDevice(ctx, vg, pool, st, taken); err != nil {
			return err
		}
	}
	if n := st.next(); n != taken && (next || taken != 0 || reset) {
		// Whatever was cut may have made the next device too, which a
		// create_thin would take as its own.
		return c.deleteThinDevice(ctx, vg, pool, st, n)
	}
	return nil
}

// deleteThinDevice deletes device id of the pool, which no LV has; the
// kernel not having it either is no error.
func (c *Client) deleteThinDevice(ctx context.Context, vg, pool string, st thinPoolState, id uint64) error {
	deleted, err := c.poolMessage(ctx, st.tpool, "delete "+strconv.FormatUint(id, 10))
	if deleted {
		klog.InfoS("Deleted a thin device no LV has (an lvm2 command was cut before its commit)",
			"pool", vg+"/"+pool, "deviceID", id)
	}
	return err
}

// poolMessage sends a thin pool a message; false without an error when
// the kernel answers ENODATA ("No data available": a delete of a device
// it does not have).
func (c *Client) poolMessage(ctx context.Context, tpool, msg string) (bool, error) {
	_, err := c.r.Run(ctx, dmsetupBinary, "message", tpool, "0", msg)
	var rerr *runner.Error
	if errors.As(err, &rerr) && strings.Contains(rerr.Stderr, "No data available") {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("dmsetup message %s %q: %w", tpool, msg, err)
	}
	return true, nil
}

// thinRow is one row of the report readThinPool reads.
type thinRow struct {
	Name   string `json:"lv_name"`
	Pool   string `json:"pool_lv"`
	ThinID string `json:"thin_id"`
	Trans  string `json:"transaction_id"`
	DMPath string `json:"lv_dm_path"`
}

const thinFields = "lv_name,pool_lv,thin_id,transaction_id,lv_dm_path"

// readThinPool reads vg/pool's transaction ids (lvs, then dmsetup status
// of its thin-pool device) and its LVs' device ids, under the VG lock.
//
// The lvs is --readonly: it reads the metadata on the disks without
// taking lvm2's locks. Measured: a plain lvs waited, while Carve held the
// VG's lock shared, for an lvcreate that waited for it exclusively (a
// deadlock until the runner's timeout; the soak hung on it). Under the
// shared lock no lvm2 command changes the metadata, so what it reads is
// current. It does not tell activation (lv_active is "unknown"): the
// kernel's devices do.
func (c *Client) readThinPool(ctx context.Context, vg, pool string) (thinPoolState, error) {
	rows, err := readonlyLVs[thinRow](ctx, c, vg, thinFields)
	if err != nil {
		return thinPoolState{}, err
	}
	st, err := thinStateOf(rows, pool)
	if err != nil {
		return thinPoolState{}, fmt.Errorf("thin pool %s/%s: %w", vg, pool, err)
	}
	var status []byte
	if st.tpool, status, err = c.thinPoolStatus(ctx, vg, pool, st.tpool); err != nil {
		return thinPoolState{}, err
	}
	if st.kernel, err = parseThinPoolStatus(string(status)); err != nil {
		return thinPoolState{}, fmt.Errorf("thin pool %s/%s: %w", vg, pool, err)
	}
	return st, nil
}

// readonlyLVs is `lvs --readonly [extra...] vg` of fields (see
// readThinPool for why read-only).
func readonlyLVs[T any](ctx context.Context, c *Client, vg, fields string, extra ...string) ([]T, error) {
	args := append(append(append([]string{"lvs", "--readonly"}, extra...), reportArgs(fields)...), vg)
	out, err := c.run(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("lvs %s: %w", vg, err)
	}
	return decodeReport[T](out, "lv")
}

// thinPoolStatus finds vg/pool's thin-pool device from dm, the pool's own
// device-mapper name, and returns its name and status. A pool used by
// thin LVs is a -tpool layer under the pool's own device; one without
// any is the pool's own device; an inactive one has neither
// (errPoolInactive).
func (c *Client) thinPoolStatus(ctx context.Context, vg, pool, dm string) (string, []byte, error) {
	status, err := c.r.Run(ctx, dmsetupBinary, "status", dm+"-tpool")
	if err == nil {
		return dm + "-tpool", status, nil
	}
	if status, err = c.r.Run(ctx, dmsetupBinary, "status", dm); err != nil {
		return dm, nil, fmt.Errorf("%s/%s: %w (dmsetup status %s: %w)", vg, pool, errPoolInactive, dm, err)
	}
	return dm, status, nil
}

// thinStateOf finds pool's row (its metadata transaction id and device)
// and the device ids of the thin LVs in it.
func thinStateOf(rows []thinRow, pool string) (thinPoolState, error) {
	st := thinPoolState{lvByID: map[uint64]string{}}
	var p fieldParser
	found := false
	for _, r := range rows {
		switch {
		case r.Name == pool:
			dm, ok := strings.CutPrefix(r.DMPath, "/dev/mapper/")
			if !ok || dm == "" || strings.ContainsAny(dm, "/ ") {
				return st, fmt.Errorf("unexpected device path %q", r.DMPath)
			}
			st.tpool, st.metadata, found = dm, p.uint("transaction_id", r.Trans), true
		case r.Pool == pool && r.ThinID != "":
			st.lvByID[p.uint("thin_id", r.ThinID)] = r.Name
		}
	}
	if p.err != nil {
		return st, p.err
	}
	if !found {
		return st, fmt.Errorf("%w: no such thin pool", ErrNotFound)
	}
	return st, nil
}

// parseThinPoolStatus reads the transaction id from a thin pool's status
// line: `0 524288 thin-pool 1 11/4096 0/4096 - rw ...` (a failed pool
// prints `thin-pool Fail` and has none).
func parseThinPoolStatus(out string) (uint64, error) {
	lines := slices.DeleteFunc(strings.Split(strings.TrimSpace(out), "\n"), func(s string) bool { return s == "" })
	if len(lines) != 1 {
		return 0, fmt.Errorf("unexpected thin pool status %q", out)
	}
	f := strings.Fields(lines[0])
	if len(f) < 4 || f[2] != "thin-pool" {
		return 0, fmt.Errorf("unexpected thin pool status %q", out)
	}
	id, err := strconv.ParseUint(f[3], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("thin pool status %q: no transaction id (a failed pool?)", lines[0])
	}
	return id, nil
}
