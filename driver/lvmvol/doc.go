// Package lvmvol is Carve's meaning of a volume on LVM: how a CSI name becomes
// a logical volume, which tags carry its state, and what create, delete,
// publish and unpublish do to it. Standalone mode calls it straight from the
// CSI services; in cluster mode the node agent calls the same code, so both
// modes share one implementation of the LVM semantics.
//
// # State lives in LVM
//
// Everything the driver needs to know about a volume is in the LV itself: its
// name (derived from the CSI name, see LVName), and its tags: tags.go is
// their schema, every tag with its meaning, its writers and clearers, and
// the states they encode. A restarted process re-reads the truth from lvs;
// nothing is kept in memory or in a state file.
//
// # Words
//
// The code leans on these words; each names a thing in LVM or on the node.
//
//   - volume: an LV tagged carve.dev/volume, carved for a CSI volume.
//   - snapshot: an LV tagged carve.dev/snapshot: a thin snapshot of a thin
//     volume, or an independent thick copy of a thick one (snapshot.go).
//     Never a volume, whatever else it carries.
//   - pending: a volume whose lvcreate is done but whose creation is not
//     (it is deactivated, grown or copied into next): tagged
//     carve.dev/pending until then.
//   - deleting: an LV whose deletion has begun (carve.dev/deleting): its
//     wipe and lvremove must finish, and it is never handed out again.
//   - settled: a volume neither pending nor deleting (isSettled): the only
//     state in which calls on an existing volume see it; a create's or
//     delete's retry finishes the others.
//   - published: attached to the node, which in Carve is active; an active
//     volume is published unless held (isPublished). A new volume is
//     inactive.
//   - held: a volume activated only so that a copy can read it (a thick
//     volume's frozen point is active only with it) or so that lvm2 can
//     convert it, not published (carve.dev/held; hold, release in
//     freeze.go). A publish takes a held volume's activation over.
//   - frozen point: a short-lived snapshot of a live volume, named
//     <target>-frz (frozenName) and tagged carve.dev/frozen, that fixes the
//     volume's image at the moment a thick snapshot or a clone is asked
//     for: the copy reads it while the volume goes on being written. A COW
//     snapshot of a thick volume, a thin snapshot of a thin one. It goes
//     once the copy is done (dropFrozenLV), releasing the volume (freeze.go).
//   - copy: data work that fills a new LV (a thick snapshot, a clone, a
//     restore) from a frozen point or a snapshot, marked by the target's
//     carve.dev/copying tag until it is done; a wipe zeroes a deleted LV.
//     Both run as jobs (jobs.go) and record their progress in tags
//     (progress records: carve.dev/copied=, carve.dev/wiped=; progress.go).
//   - layer: the device-mapper linear device the node puts above a
//     volume's LV and mounts its filesystem on (mapper.Linear; Layers in
//     layers.go). Suspending it (with lockfs) holds the volume's I/O with
//     its filesystem flushed and frozen, which lvm2's own suspend of the LV
//     cannot do for a filesystem above it.
//   - window: the time the layers of a snapshot's volumes are suspended,
//     their I/O held, while lvm2 takes the snapshot (snapshotLV) or, for a
//     group, each member's instant (group.go); bounded by maxFreeze,
//     logged at its end.
//   - instant: a group member's point in time, taken in the group's
//     window: a thin member's snapshot LV itself, a thick member's frozen
//     point (copied into its snapshot LV after the window).
//   - cachevol: the LV of a volume's write cache (writecache.go), tagged
//     carve.dev/cache-of=, hidden by lvm2 while attached.
//
// # Crash safety
//
// Every multi-step operation marks its intent on the LV first and is safe to
// run again from the start:
//   - create: lvcreate adds the volume's tags and carve.dev/pending atomically,
//     the LV is then deactivated and the pending tag dropped. A retry that finds
//     the pending tag redoes the tail. A pending LV is not listed or published.
//     A thin volume (and a thin restore of its own size) takes one step:
//     lvcreate -an with the final tags, settled in the commit that makes it,
//     so it needs no pending tag. No create looks its name up first: lvcreate
//     fails on a taken name having changed nothing, and then the LV is read
//     and judged (CreateVolume).
//   - delete: the carve.dev/deleting tag goes on first, then the LV is wiped
//     and removed. A retry (or a CreateVolume of the same name) that finds the
//     tag finishes the job. A deleting LV is never handed out again. A thin
//     volume with nothing to wipe or undo is removed in one step, lvremove,
//     which needs no mark (DeleteVolume).
//   - long data work (a wipe, a copy) records how far it has got in a tag of
//     the LV it writes (carve.dev/wiped, carve.dev/copied; see progress.go),
//     after flushing the bytes the record counts, so a retry resumes there
//     instead of at byte 0.
//
// # A new volume never shows a former tenant's data
//
// Thick LVs are carved from extents that may have held another volume. Two
// rules keep that data from leaking:
//  1. Every LV Carve deletes is zeroed over its whole length (BLKZEROOUT via
//     blkdiscard --zeroout, in chunks) before lvremove returns its extents to
//     the VG. The deleting tag makes an interrupted wipe go on, never skip:
//     it resumes after the last chunk recorded as zeroed and flushed.
//
// # Long work has its own deadline
//
// Zeroing, copying, mkfs, fsck and filesystem growth take time in proportion
// to the volume. They are data work (see lvm/runner): each is bounded by a
// deadline sized for its bytes (runner.DataBudget), never by the per-command
// timeout (--command-timeout) that bounds lvm's metadata commands. A wipe or
// delete also runs detached from the caller's context, so a CO that gives
// up does not cut it short. Copies and wipes run as background jobs of the
// Manager (jobs.go): retries join them, a delete stops a copy into its LV,
// and with BackgroundDataWork (the node agent) a call does not wait for
// them but answers ErrDataPending until they are done.
//  2. lvcreate runs with --zero y --wipesignatures y, so even extents freed
//     outside Carve never carry a filesystem signature into a new volume; the
//     node therefore never mistakes stale data for a filesystem to mount.
//
// Extents freed by an administrator's own lvremove are not zeroed by Carve:
// the README says so.
//
// # Attach is real
//
// A volume is active only while it is published: create leaves it inactive,
// PublishVolume activates it, UnpublishVolume deactivates it. Nothing on the
// node can write to an unpublished volume by accident.
package lvmvol
