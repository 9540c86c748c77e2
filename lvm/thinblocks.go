package lvm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"k8s.io/klog/v2"

	"carve.dev/carve/lvm/runner"
)

// Which blocks of a thin LV the pool has allocated, and which differ
// between two thin LVs of a pool (a snapshot and a later one of the same
// volume), read from the pool's own metadata: the building block of
// changed-block tracking (CSI SnapshotMetadata).
//
// The pool's metadata is live: the kernel changes it under any reader.
// So the read is of a metadata snapshot, which the kernel takes on
// reserve_metadata_snap (committing first, so every write completed
// before it is in) and keeps, unchanged, until release_metadata_snap;
// thin_dump and thin_delta read it with --metadata-snap from the pool's
// metadata sub-device (<pool>_tmeta, active while the pool is).
// Measured (lvm2 2.03.16, thin-provisioning-tools 0.9.0, in the VM):
// without --metadata-snap both tools refuse the live device (their
// O_EXCL open fails: "you cannot run this tool with these options on live
// metadata"); with it and none reserved they fail "no current metadata
// snap"; a second reserve fails EBUSY ("Device or resource busy"), a
// release of none EINVAL; a reserved snapshot outlives the pool's
// deactivation and activation (the kernel keeps its root in the
// superblock, the status's "held metadata root"), and lvcreate and
// lvremove in the pool work while one is held.
//
// There is one metadata snapshot per pool, and nothing records who
// reserved it. lvm2 2.03.16 never does: its libdevmapper can format both
// messages, but no lvm2 command or dmeventd plugin sends them (its
// sources name DM_THIN_MESSAGE_RESERVE_METADATA_SNAP only in that
// formatter). So a snapshot found reserved is one this code left when
// carve was killed between reserve and release (the release runs on
// every return, errors and cancellations included), or one an
// administrator took by hand for thin_dump -m. Reads of a VG are
// serialised within the process (metaSnapLocks), so it is never a read
// still running here: it is released and reserved again, and the
// release is logged. A held snapshot also costs the pool metadata space
// as the live metadata moves away from it, so none is left behind.
//
// lvm2's VG lock is held shared (lockVGShared) from the report that
// names the LVs' device ids to the reserve: no lvm2 command of the VG is
// half way meanwhile (a device id freed by an lvremove and taken again by
// an lvcreate, a kernel ahead of lvm2's metadata), so the ids name the
// devices the snapshot holds. It is let go before the tools run: the
// snapshot no longer changes, and a read streamed to a slow consumer must
// not hold up every lvm2 command of the VG.

// ThinAllocated calls each with the ranges of lv (a thin LV of vg) that
// its pool has allocated, read from a metadata snapshot of the pool.
//
// The contract, for a CSI GetMetadataAllocated stream: the ranges come
// in increasing order of offset, do not overlap, and are merged (no two
// adjacent); each ends after from (a range that ends after from is
// included whole, possibly starting before it), and none reaches past
// the LV's size. Every byte the LV maps is in a range (never fewer); a
// range may cover bytes never written, at most one pool chunk on either
// side of a written run (the pool allocates whole chunks). Bytes outside
// every range read as zeroes. An error from each stops the read and is
// returned.
//
// Errors: ErrInvalidName before any command; ErrNotFound for an LV the
// VG does not have; ErrInvalidArgument for an LV that is not a thin LV,
// or whose blocks the pool does not fully describe (an external origin).
// The pool is activated if it is not. The tool's read runs under a data
// deadline (runner.DataWork, sized by the LV), bounded otherwise by ctx.
func (c *Client) ThinAllocated(ctx context.Context, vg, lv string, from uint64, each func(Range) error) error {
	if err := validateVGLV(vg, lv); err != nil {
		return err
	}
	return c.withMetadataSnap(ctx, vg, []string{lv}, func(ctx context.Context, p thinSnapPool) error {
		dev := p.devs[0]
		m := &rangeMerger{want: p.chunk, from: from, limit: dev.size, each: each}
		return c.readTool(ctx, dev.size, func(r io.Reader) error { return parseThinDump(r, dev.id, m) },
			thinDumpBinary, "--metadata-snap", "--dev-id", strconv.FormatUint(dev.id, 10), p.tmeta)
	})
}

// ThinDelta calls each with the ranges of target that may differ from
// base, two thin LVs of one pool of vg (a snapshot and a later snapshot
// of the same volume), read from a metadata snapshot of the pool.
//
// The contract, for a CSI GetMetadataDelta stream, is ThinAllocated's
// with "differ" for "allocated": ranges in increasing order, not
// overlapping, merged, each ending after from, none past target's size.
// A block counts when the two LVs map it to different data blocks, or
// only one of them maps it (a block unmapped reads zeroes): every byte
// that reads differently is in a range; a range may also cover bytes
// rewritten with the same data, and at most one pool chunk on either side
// of a changed run.
//
// Errors: ThinAllocated's, and ErrInvalidArgument for LVs of different
// pools.
func (c *Client) ThinDelta(ctx context.Context, vg, base, target string, from uint64, each func(Range) error) error {
	if err := validateVGLV(vg, base); err != nil {
		return err
	}
	if err := validateVGLV(vg, target); err != nil {
		return err
	}
	return c.withMetadataSnap(ctx, vg, []string{base, target}, func(ctx context.Context, p thinSnapPool) error {
		left, right := p.devs[0], p.devs[1]
		m := &rangeMerger{want: p.chunk, from: from, limit: right.size, each: each}
		return c.readTool(ctx, max(left.size, right.size),
			func(r io.Reader) error { return parseThinDelta(r, left.id, right.id, m) },
			thinDeltaBinary, "--metadata-snap", "--snap1", strconv.FormatUint(left.id, 10),
			"--snap2", strconv.FormatUint(right.id, 10), p.tmeta)
	})
}

// readTool runs one of the tools under a data deadline sized for size
// bytes of LV: its time grows with the mappings it prints, and with how
// fast each takes them.
func (c *Client) readTool(ctx context.Context, size uint64, read func(io.Reader) error, name string, args ...string) error {
	dctx, cancel := runner.DataWork(ctx, runner.DataBudget(int64(min(size, 1<<62))))
	defer cancel()
	return runner.Stream(dctx, c.r, read, name, args...)
}

// thinDev is a thin LV's device in its pool.
type thinDev struct {
	id, size uint64 // device id; the LV's size in bytes
}

// thinSnapPool is a pool whose metadata snapshot is reserved.
type thinSnapPool struct {
	name  string // the pool LV's
	tpool string // the thin-pool device (dm name)
	tmeta string // the metadata sub-device's path
	chunk uint64 // the pool's chunk size, bytes
	devs  []thinDev
}

// thinBlocksRow is one row of withMetadataSnap's report.
type thinBlocksRow struct {
	Name     string `json:"lv_name"`
	Pool     string `json:"pool_lv"`
	ThinID   string `json:"thin_id"`
	DMPath   string `json:"lv_dm_path"`
	Size     string `json:"lv_size"`
	Chunk    string `json:"chunk_size"`
	Metadata string `json:"metadata_lv"`
	Origin   string `json:"origin"`
}

const thinBlocksFields = "lv_name,pool_lv,thin_id,lv_dm_path,lv_size,chunk_size,metadata_lv,origin"

// metaSnapLocks serialises the metadata snapshot reads of each VG in this
// process: the pool's one snapshot is a read's from its reserve to its
// release, and a read that found another's would release it.
type metaSnapLocks struct {
	mu    sync.Mutex
	locks map[string]chan struct{}
}

func (l *metaSnapLocks) lock(ctx context.Context, vg string) (func(), error) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]chan struct{}{}
	}
	ch, ok := l.locks[vg]
	if !ok {
		ch = make(chan struct{}, 1)
		l.locks[vg] = ch
	}
	l.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for another read of VG %s's thin metadata: %w", vg, ctx.Err())
	}
}

// withMetadataSnap reserves a metadata snapshot of the pool of lvs (thin
// LVs of vg, all of one pool), calls read with the pool and the LVs'
// devices in the order of lvs, and releases the snapshot whatever read
// returns, ctx's end included.
func (c *Client) withMetadataSnap(ctx context.Context, vg string, lvs []string, read func(context.Context, thinSnapPool) error) error {
	unlockReads, err := c.metaSnaps.lock(ctx, vg)
	if err != nil {
		return err
	}
	defer unlockReads()
	p, err := c.reserveMetadataSnap(ctx, vg, lvs)
	if errors.Is(err, errPoolInactive) {
		// lvm2 activates with its VG lock held exclusively: outside ours.
		if err = c.Activate(ctx, vg, p.name); err == nil {
			p, err = c.reserveMetadataSnap(ctx, vg, lvs)
		}
	}
	if err != nil {
		return err
	}
	err = read(ctx, p)
	// A cancelled ctx must not keep the release from running.
	if rerr := c.releaseMetadataSnap(context.WithoutCancel(ctx), vg, p, false); rerr != nil {
		klog.ErrorS(rerr, "Could not release a thin pool's metadata snapshot: the next read of the pool releases it", "pool", vg+"/"+p.name)
		// The ranges handed on were right; the snapshot left costs the
		// pool metadata space until a read releases it, so say so.
		return errors.Join(err, fmt.Errorf("release the metadata snapshot of thin pool %s/%s: %w", vg, p.name, rerr))
	}
	return err
}

// reserveMetadataSnap finds lvs' pool and reserves its metadata snapshot,
// releasing first one left reserved, all under lvm2's VG lock. A pool
// that is not active fails errPoolInactive, with the pool's name set.
func (c *Client) reserveMetadataSnap(ctx context.Context, vg string, lvs []string) (thinSnapPool, error) {
	unlock, err := c.lockVGShared(ctx, vg)
	if err != nil {
		return thinSnapPool{}, err
	}
	defer unlock()
	// --readonly under the shared lock, as readThinPool reads.
	rows, err := readonlyLVs[thinBlocksRow](ctx, c, vg, thinBlocksFields, "-a")
	if err != nil {
		return thinSnapPool{}, err
	}
	p, err := thinSnapPoolOf(rows, vg, lvs)
	if err != nil {
		return p, err
	}
	var status []byte
	if p.tpool, status, err = c.thinPoolStatus(ctx, vg, p.name, p.tpool); err != nil {
		return p, err
	}
	held, err := parseHeldRoot(string(status))
	if err != nil {
		return p, fmt.Errorf("thin pool %s/%s: %w", vg, p.name, err)
	}
	if held {
		if err := c.releaseMetadataSnap(ctx, vg, p, true); err != nil {
			return p, err
		}
	}
	err = c.metadataSnapMessage(ctx, p.tpool, "reserve_metadata_snap")
	if errors.Is(err, errMetadataSnapHeld) && !held {
		// Reserved between the status and now: by hand, as no lvm2
		// command nor another read of this process does.
		if err = c.releaseMetadataSnap(ctx, vg, p, true); err == nil {
			err = c.metadataSnapMessage(ctx, p.tpool, "reserve_metadata_snap")
		}
	}
	if err != nil {
		return p, fmt.Errorf("reserve the metadata snapshot of thin pool %s/%s: %w", vg, p.name, err)
	}
	return p, nil
}

// ReleaseMetadataSnaps releases the metadata snapshots held by vg's
// active thin pools, and returns the pools it released. Carve runs it at
// its start: no read of this process holds one then, so each is one a
// carve killed mid-read left (or one taken by hand, which the next read
// of the pool would release as well; see above), and it costs its pool
// metadata space for as long as it stays, which without a start-time
// release would be until the next read of a pool of the VG, if any.
// Reads of the VG in this process wait for it (metaSnaps). One dmsetup
// status for every thin pool of the machine, no lvm2 command; a message
// only for a snapshot held.
func (c *Client) ReleaseMetadataSnaps(ctx context.Context, vg string) ([]string, error) {
	if err := ValidateVGName(vg); err != nil {
		return nil, err
	}
	unlock, err := c.metaSnaps.lock(ctx, vg)
	if err != nil {
		return nil, err
	}
	defer unlock()
	out, err := c.r.Run(ctx, dmsetupBinary, "status", "--target", "thin-pool")
	if err != nil {
		return nil, fmt.Errorf("dmsetup status --target thin-pool: %w", err)
	}
	var released []string
	for _, line := range strings.Split(string(out), "\n") {
		name, status, ok := strings.Cut(strings.TrimSpace(line), ": ")
		v, pool, layer, isLV := SplitDMName(name)
		if !ok || !isLV || v != vg || layer != "" && layer != "tpool" {
			continue // "No devices found", another VG's pool
		}
		// A failed pool's status says nothing held, and takes no message.
		if held, err := parseHeldRoot(status); err != nil || !held {
			continue
		}
		p := thinSnapPool{name: pool, tpool: name}
		if err := c.releaseMetadataSnap(ctx, vg, p, true); err != nil {
			return released, err
		}
		released = append(released, pool)
	}
	return released, nil
}

// releaseMetadataSnap releases p's metadata snapshot: one left reserved
// (leftover: logged as such), or the read's own. None reserved is no
// error: the outcome is the same.
func (c *Client) releaseMetadataSnap(ctx context.Context, vg string, p thinSnapPool, leftover bool) error {
	err := c.metadataSnapMessage(ctx, p.tpool, "release_metadata_snap")
	switch {
	case errors.Is(err, errNoMetadataSnap):
		if !leftover {
			klog.InfoS("A thin pool's metadata snapshot was already released when its read ended (by hand?)", "pool", vg+"/"+p.name)
		}
		return nil
	case err != nil:
		return fmt.Errorf("release the metadata snapshot of thin pool %s/%s: %w", vg, p.name, err)
	case leftover:
		klog.InfoS("Released a thin pool's metadata snapshot left reserved (carve killed during a read of the pool's metadata, or one taken by hand)",
			"pool", vg+"/"+p.name)
	}
	return nil
}

var (
	errMetadataSnapHeld = errors.New("a metadata snapshot is already reserved")
	errNoMetadataSnap   = errors.New("no metadata snapshot reserved")
)

// metadataSnapMessage sends tpool reserve_ or release_metadata_snap; the
// kernel's EBUSY (one already reserved) and EINVAL (none to release) are
// told apart.
func (c *Client) metadataSnapMessage(ctx context.Context, tpool, msg string) error {
	_, err := c.r.Run(ctx, dmsetupBinary, "message", tpool, "0", msg)
	var rerr *runner.Error
	if errors.As(err, &rerr) {
		switch {
		case msg == "reserve_metadata_snap" && strings.Contains(rerr.Stderr, "Device or resource busy"):
			return fmt.Errorf("%w: %w", errMetadataSnapHeld, err)
		case msg == "release_metadata_snap" && strings.Contains(rerr.Stderr, "Invalid argument"):
			return fmt.Errorf("%w: %w", errNoMetadataSnap, err)
		}
	}
	if err != nil {
		return fmt.Errorf("dmsetup message %s %q: %w", tpool, msg, err)
	}
	return nil
}

// thinSnapPoolOf finds in rows (lvs -a of vg) the thin LVs lvs, their
// one pool, its chunk size and metadata sub-device.
func thinSnapPoolOf(rows []thinBlocksRow, vg string, lvs []string) (thinSnapPool, error) {
	byName := make(map[string]thinBlocksRow, len(rows))
	for _, r := range rows {
		byName[strings.Trim(r.Name, "[]")] = r
	}
	var p thinSnapPool
	var fp fieldParser
	for _, name := range lvs {
		r, ok := byName[name]
		switch {
		case !ok:
			return p, fmt.Errorf("%w: LV %s/%s", ErrNotFound, vg, name)
		case r.Pool == "" || r.ThinID == "":
			return p, fmt.Errorf("%w: %s/%s is not a thin LV", ErrInvalidArgument, vg, name)
		case p.name != "" && r.Pool != p.name:
			return p, fmt.Errorf("%w: %s/%s is in thin pool %s, %s/%s in %s", ErrInvalidArgument,
				vg, lvs[0], p.name, vg, name, r.Pool)
		}
		p.name = r.Pool
		p.devs = append(p.devs, thinDev{id: fp.uint("thin_id", r.ThinID), size: fp.uint("lv_size", r.Size)})
		// Blocks a thin LV with an external origin does not map read the
		// origin's, which the pool's metadata does not tell. Its thin
		// snapshots name their thin origin; the chain ends at an LV
		// without one, or at the external origin.
		seen := map[string]bool{name: true}
		for o := strings.Trim(r.Origin, "[]"); o != ""; o = strings.Trim(byName[o].Origin, "[]") {
			if or, ok := byName[o]; seen[o] || !ok || or.Pool != p.name || or.ThinID == "" {
				return p, fmt.Errorf("%w: %s/%s has an external origin (%s): the pool does not map all of its blocks",
					ErrInvalidArgument, vg, name, o)
			}
			seen[o] = true
		}
	}
	if fp.err != nil {
		return p, fp.err
	}
	pool, ok := byName[p.name]
	if !ok {
		return p, fmt.Errorf("thin pool %s/%s: not in the report", vg, p.name)
	}
	p.chunk = fp.uint("chunk_size", pool.Chunk)
	meta, ok := byName[strings.Trim(pool.Metadata, "[]")]
	if fp.err != nil {
		return p, fmt.Errorf("thin pool %s/%s: %w", vg, p.name, fp.err)
	}
	if p.chunk == 0 || !ok {
		return p, fmt.Errorf("thin pool %s/%s: no chunk size (%q) or metadata LV (%q)", vg, p.name, pool.Chunk, pool.Metadata)
	}
	dm, ok := strings.CutPrefix(pool.DMPath, "/dev/mapper/")
	if !ok || dm == "" || strings.ContainsAny(dm, "/ ") || !strings.HasPrefix(meta.DMPath, "/dev/mapper/") ||
		strings.ContainsAny(strings.TrimPrefix(meta.DMPath, "/dev/mapper/"), "/ ") {
		return p, fmt.Errorf("thin pool %s/%s: unexpected device paths %q, %q", vg, p.name, pool.DMPath, meta.DMPath)
	}
	p.tpool, p.tmeta = dm, meta.DMPath
	return p, nil
}

// parseHeldRoot tells whether a thin pool's status line (`0 524288
// thin-pool 3 114/1024 8/4096 58 rw ...`) holds a metadata root: the
// block of a reserved metadata snapshot, "-" when none.
func parseHeldRoot(out string) (bool, error) {
	line := strings.TrimSpace(out)
	f := strings.Fields(line)
	if strings.Contains(line, "\n") || len(f) < 4 || f[2] != "thin-pool" {
		return false, fmt.Errorf("unexpected thin pool status %q", out)
	}
	u, err := parseThinPoolUsage(strings.Join(f[3:], " "))
	if err != nil {
		return false, err
	}
	if u.dataTotal == 0 {
		return false, fmt.Errorf("thin pool status %q: the pool has failed", line)
	}
	return f[6] != "-", nil
}
