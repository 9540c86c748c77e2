package lvmvol

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// Group snapshots: the volumes' snapshots at one instant.
//
// The instant: the layers of all published members are suspended together
// (lockfs: each filesystem flushed and frozen; see layers.go), then lvm2
// takes each member's instant, then the layers are resumed. A thin
// member's instant is its snapshot LV; a thick member's is its frozen
// point, copied after the window into its snapshot LV as a single thick
// snapshot's is (snapshot.go). Every LV of a group carries its group tag
// (the group name's hash) and its size tag (how many members).
//
// Crash safety, by what a retried CreateGroupSnapshot finds:
//   - every member's instant (thin snapshot LV; thick snapshot LV or its
//     frozen point): the window completed. The missing thick snapshot LVs
//     are made (they are made only after the window), and the copies go on;
//   - some instants but not all: the window was cut. Its instants would
//     not be one with new ones, so they are removed and the window is cut
//     again: no thick snapshot LV exists yet;
//   - members of other volumes, or another size: another group of that
//     name (ALREADY_EXISTS).
//
// The steps, each a function, with the state it reads and leaves (a step
// that finds its outcome already there does nothing, so a retry after a
// crash anywhere goes on from the LVs it finds):
//
//	step                   reads                          leaves
//	judge                  the group's LVs                cut, or not (or ALREADY_EXISTS)
//	cutGroup: dropGroupLVs a cut-short window's instants  none of them
//	          groupRoom    the VG's free space            (RESOURCE_EXHAUSTED, nothing changed)
//	          hold         each thick source              active, held
//	          window       the layers                     every instant; layers resumed
//	finishGroup            the instants                   thick members' LVs (copying); copies
//	                                                      started or joined (awaitCopies)
//
// A member cannot be deleted on its own (INVALID_ARGUMENT, as the CSI
// spec has it): a group missing one would read as a window cut short and
// be cut again at its next create, at another instant.

// groupID is the ID of group key in vg: node/vg/group-<key>; no LV has
// the name (members and frozen points are named snap-…).
func (m *Manager) groupID(vg, key string) volume.ID {
	return volume.ID{Node: m.node, VG: vg, LV: volume.GroupNameOfKey(key)}
}

// memberLVName is the LV name of the member snapshot of source in group
// name: derived, so a retry finds it.
func memberLVName(group, source string) string {
	return volume.SnapshotLVName(group + "/" + source)
}

// groupOf reads a group snapshot ID: its VG and key.
func (m *Manager) groupOf(id volume.ID) (vg, key string, err error) {
	key, ok := volume.GroupKeyOf(id.LV)
	if !ok || id.Node != m.node || !slices.Contains(m.vgs, id.VG) {
		return "", "", fmt.Errorf("group snapshot %s: %w", id, volume.ErrSnapshotNotFound)
	}
	return id.VG, key, nil
}

// groupSources checks a group's sources: at least one, none twice, all
// on this node, in one VG (FAILED_PRECONDITION otherwise: Carve cuts the
// instant of one VG's volumes).
func (m *Manager) groupSources(sources []volume.ID) (string, error) {
	if len(sources) == 0 {
		return "", fmt.Errorf("%w: a group snapshot needs source volumes", volume.ErrInvalidArgument)
	}
	seen := map[volume.ID]bool{}
	for _, s := range sources {
		switch {
		case seen[s]:
			return "", fmt.Errorf("%w: volume %s named twice", volume.ErrInvalidArgument, s)
		case s.Node != m.node:
			return "", fmt.Errorf("%w: volume %s lives on node %s, %s on %s: a group snapshot's volumes must share a node",
				volume.ErrFailedPrecondition, s, s.Node, sources[0], m.node)
		case s.VG != sources[0].VG:
			return "", fmt.Errorf("%w: volumes %s and %s are in different volume groups: a group snapshot's volumes must share one",
				volume.ErrFailedPrecondition, sources[0], s)
		}
		seen[s] = true
	}
	return sources[0].VG, nil
}

// CreateGroupSnapshot snapshots sources at one instant under name, or
// returns the group an earlier call made (see above).
func (m *Manager) CreateGroupSnapshot(ctx context.Context, name string, sources []volume.ID) (volume.GroupSnapshot, error) {
	vg, err := m.groupSources(sources)
	if err != nil {
		return volume.GroupSnapshot{}, err
	}
	r := sharedReads() // one fresh report of the VG until a change
	srcs := make([]lvm.LV, len(sources))
	for i, s := range sources {
		if srcs[i], err = m.lookupSettled(ctx, r, s); err != nil {
			return volume.GroupSnapshot{}, err
		}
		if err := changeableLV(srcs[i]); err != nil {
			return volume.GroupSnapshot{}, err
		}
	}
	g := group{name: name, key: volume.GroupKey(name), srcs: srcs}
	found, err := m.groupLVs(ctx, r, vg, g.key)
	if err != nil {
		return volume.GroupSnapshot{}, err
	}
	cut, err := g.judge(found)
	if err != nil {
		return volume.GroupSnapshot{}, err
	}
	if !cut {
		if err := m.cutGroup(ctx, r, g, found); err != nil {
			return volume.GroupSnapshot{}, err
		}
		if found, err = m.groupLVs(ctx, r, vg, g.key); err != nil {
			return volume.GroupSnapshot{}, err
		}
	}
	return m.finishGroup(ctx, r, g, found)
}

// group is a CreateGroupSnapshot's request: its name, key and sources.
type group struct {
	name, key string
	srcs      []lvm.LV
}

func (g group) size() string { return strconv.Itoa(len(g.srcs)) }

// tags are the group tags of each of its LVs.
func (g group) tags() []string {
	return []string{tagGroupPrefix + g.key, tagGroupSizePrefix + g.size()}
}

// judge tells from the group's LVs found whether its window was cut
// (every source has its instant), or not (none or some have); members of
// another source, or LVs of another size, are another group of that name.
// A frozen point counts only when whole (see adoptFrozen), a member only
// when not being deleted.
func (g group) judge(found []lvm.LV) (cut bool, err error) {
	instants := map[string]bool{}
	for _, lv := range found {
		src := tagValue(lv, tagSourcePrefix)
		if tagValue(lv, tagGroupSizePrefix) != g.size() ||
			!isFrozen(lv) && !slices.ContainsFunc(g.srcs, func(s lvm.LV) bool { return s.Name == src }) {
			return false, fmt.Errorf("group snapshot %q exists with other volumes: %w", g.name, volume.ErrNameConflict)
		}
		switch {
		case lv.HasTag(tagDeleting):
		case isFrozen(lv) && lv.Origin != "" && (!lv.Active || lv.Live()):
			instants[lv.Origin] = true
		case !isFrozen(lv):
			instants[src] = true
		}
	}
	for _, s := range g.srcs {
		if !instants[s.Name] {
			return false, nil
		}
	}
	return true, nil
}

// groupLVs are the LVs of vg carrying group key's tag: members and frozen
// points.
func (m *Manager) groupLVs(ctx context.Context, r lvm.Reads, vg, key string) ([]lvm.LV, error) {
	lvs, err := m.lvm.ListLVs(ctx, r, vg)
	if err != nil {
		return nil, fmt.Errorf("list group snapshot LVs in %s: %w", vg, err)
	}
	return slices.DeleteFunc(lvs, func(lv lvm.LV) bool { return !lv.HasTag(tagGroupPrefix + key) }), nil
}

// cutGroup removes the instants of a window cut short (found), then cuts
// the group's window: thick sources held active first (an unpublished
// volume must be active to be frozen, as for a single snapshot), the
// layers of all sources suspended, each instant taken, the layers
// resumed. Any failure leaves some instants, which the next call removes;
// a held source with no instant yet is let go at once, since a CO may
// delete the group instead of retrying (one with its frozen point stays
// held until the frozen point is dropped: dropFrozenLV releases it).
func (m *Manager) cutGroup(ctx context.Context, r lvm.Reads, g group, found []lvm.LV) (err error) {
	if err := m.dropGroupLVs(ctx, r, found); err != nil {
		return err
	}
	if err := m.groupRoom(ctx, r, g); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			m.releaseHeld(context.WithoutCancel(ctx), r, g)
		}
	}()
	for _, s := range g.srcs {
		if s.PoolLV == "" {
			if err := m.hold(ctx, r, s); err != nil {
				return err
			}
		}
	}
	return m.window(ctx, g)
}

// window takes every source's instant with their layers suspended.
func (m *Manager) window(ctx context.Context, g group) error {
	if err := m.canHoldTogether(g); err != nil {
		return err
	}
	held, err := m.suspendLayers(ctx, g.srcs)
	if err != nil {
		return err
	}
	defer held.resume(ctx)
	fctx, cancel := context.WithTimeout(ctx, maxFreeze)
	defer cancel()
	created := strconv.FormatInt(time.Now().Unix(), 10)
	for _, s := range g.srcs {
		if err := m.takeInstant(fctx, g, s, created); err != nil {
			return fmt.Errorf("group snapshot %q: instant of %s: %w", g.name, s.Name, err)
		}
	}
	return nil
}

// releaseHeld lets go of the thick sources a failed window held (release
// keeps those with a frozen point, and leaves published ones alone). A
// failure is only logged: the window's error is the call's, and a later
// publish or snapshot of the volume takes the activation over.
func (m *Manager) releaseHeld(ctx context.Context, r lvm.Reads, g group) {
	for _, s := range g.srcs {
		if s.PoolLV != "" {
			continue
		}
		if err := m.release(ctx, r, s.VGName, s.Name); err != nil {
			klog.ErrorS(err, "Could not let go of a volume held for a failed group snapshot window", "lv", s.VGName+"/"+s.Name)
		}
	}
}

// canHoldTogether refuses a group with a volume in use but not through a
// layer (a raw block volume bound into a pod, or a filesystem staged on
// its LV by a Carve that made no layers): its writes cannot be held with
// the others', and lvm2's own suspend would snapshot it at another
// instant (FAILED_PRECONDITION). A volume nothing has open has no writes
// to hold.
func (m *Manager) canHoldTogether(g group) error {
	if m.layers == nil {
		return nil
	}
	for _, s := range g.srcs {
		if !s.Active || !s.Open || s.KernelMajor < 0 || s.KernelMinor < 0 {
			continue
		}
		_, found, err := m.layers.Find(s.VGName, s.Name, unix.Mkdev(uint32(s.KernelMajor), uint32(s.KernelMinor)))
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: volume %s/%s is in use without Carve's layer (a raw block volume, or staged before Carve made layers): its writes cannot be held with the others'",
				volume.ErrFailedPrecondition, s.VGName, s.Name)
		}
	}
	return nil
}

// takeInstant is one source's instant in the window: its thin snapshot,
// inactive, the member itself; or a thick one's frozen point. Either is
// made with the layers suspended (lvm.SnapshotOptions.SuspendedLayers).
func (m *Manager) takeInstant(ctx context.Context, g group, s lvm.LV, created string) error {
	member := memberLVName(g.name, s.Name)
	if s.PoolLV != "" {
		tags := append(memberTags(g, s), tagCreatedPrefix+created)
		_, err := m.lvm.CreateSnapshotOf(ctx, s, member, lvm.SnapshotOptions{Tags: tags, Inactive: true, SkipReadBack: true, SuspendedLayers: true})
		return err
	}
	o := lvm.SnapshotOptions{Tags: append([]string{tagFrozen, tagCreatedPrefix + created}, g.tags()...),
		COWSize: cowSizeFor(s.Size), ChunkSize: frozenChunk, SkipReadBack: true, SuspendedLayers: true}
	_, err := m.lvm.CreateSnapshotOf(ctx, s, frozenName(member), o)
	return err
}

// memberTags are the tags of source s's member snapshot in g.
func memberTags(g group, s lvm.LV) []string {
	tags := append([]string{tagSnapshot, tagSourcePrefix + s.Name}, g.tags()...)
	if s.HasTag(tagEncrypted) {
		tags = append(tags, tagEncrypted)
	}
	return tags
}

// groupRoom checks the VG has room for the thick members: their copies and
// frozen points (RESOURCE_EXHAUSTED otherwise).
func (m *Manager) groupRoom(ctx context.Context, r lvm.Reads, g group) error {
	var need uint64
	vg, err := m.changeableVG(ctx, r, g.srcs[0].VGName)
	if err != nil {
		return err
	}
	for _, s := range g.srcs {
		if s.PoolLV == "" {
			need += lvm.RoundUp(s.Size, vg.ExtentSize) + lvm.RoundUp(cowSizeFor(s.Size), vg.ExtentSize)
		}
	}
	if need > vg.Free {
		return fmt.Errorf("group snapshot %q needs %s for its thick members (copies and frozen points), volume group %s has %s free: %w",
			g.name, lvm.FormatSize(need), vg.Name, lvm.FormatSize(vg.Free), lvm.ErrNoSpace)
	}
	return nil
}

// dropGroupLVs removes a group's LVs: frozen points (releasing their
// volumes), then members as snapshots are deleted.
func (m *Manager) dropGroupLVs(ctx context.Context, r lvm.Reads, lvs []lvm.LV) error {
	for _, lv := range lvs {
		if isFrozen(lv) {
			klog.InfoS("Dropping the instant of a group snapshot's window cut short", "lv", lv.VGName+"/"+lv.Name)
			if err := m.dropFrozenLV(ctx, r, lv, lv.Origin); err != nil {
				return err
			}
		}
	}
	for _, lv := range lvs {
		if !isFrozen(lv) {
			if err := m.deleteSnapshotLV(ctx, r, lv); err != nil {
				return err
			}
		}
	}
	return nil
}

// finishGroup makes the thick members' snapshot LVs the window left to
// make, starts or joins their copies, and reports the group.
func (m *Manager) finishGroup(ctx context.Context, r lvm.Reads, g group, found []lvm.LV) (volume.GroupSnapshot, error) {
	byName := map[string]lvm.LV{}
	for _, lv := range found {
		byName[lv.Name] = lv
	}
	var vg lvm.VG // read once, when a thick member's LV is to be made
	out := volume.GroupSnapshot{ID: m.groupID(g.srcs[0].VGName, g.key)}
	members := make([]lvm.LV, 0, len(g.srcs))
	for _, s := range g.srcs {
		member := memberLVName(g.name, s.Name)
		lv, ok := byName[member]
		if !ok {
			var err error
			if vg.Name == "" {
				if vg, err = m.changeableVG(ctx, r, s.VGName); err != nil {
					return volume.GroupSnapshot{}, err
				}
			}
			// Its creation time is the window's, which its frozen
			// point's tag holds.
			frozen := byName[frozenName(member)]
			tags := append(memberTags(g, s), tagCopying, tagCreatedPrefix+tagValue(frozen, tagCreatedPrefix))
			if lv, err = m.lvm.CreateLV(ctx, lvOptions(volume.Type{}, vg, member, s.Size, tags)); err != nil {
				return volume.GroupSnapshot{}, fmt.Errorf("group snapshot %q: member of %s: %w", g.name, s.Name, err)
			}
			klog.InfoS("Created a group snapshot's thick member; copying its data", "group", g.name, "lv", s.VGName+"/"+member, "source", s.Name)
		}
		members = append(members, lv)
	}
	if err := m.awaitCopies(ctx, members); err != nil {
		return volume.GroupSnapshot{}, fmt.Errorf("group snapshot %q: %w", g.name, err)
	}
	for _, lv := range members {
		out.Add(m.snapshotOf(lv))
	}
	out.Ready = out.Ready && len(out.Snapshots) == len(g.srcs)
	return out, nil
}

// awaitCopies starts (or joins) the copies into the thick members among
// lvs and waits for them up to copyGrace in all, as awaitCopy does for one
// snapshot; a member whose copy finished is marked ready in lvs. A copy
// that failed is the caller's error, once (the next call starts it again).
func (m *Manager) awaitCopies(ctx context.Context, lvs []lvm.LV) error {
	type copying struct {
		i   int
		key string
		j   *job
	}
	var running []copying
	for i, lv := range lvs {
		if lv.HasTag(tagCopying) {
			key, j := m.startSnapshotCopy(lv)
			running = append(running, copying{i, key, j})
		}
	}
	deadline := time.Now().Add(copyGrace)
	for _, c := range running {
		finished, err := m.jobs.await(ctx, c.key, c.j, max(0, time.Until(deadline)))
		if err != nil {
			return fmt.Errorf("copy into member %s/%s: %w", lvs[c.i].VGName, lvs[c.i].Name, err)
		}
		if finished {
			lvs[c.i] = copied(lvs[c.i])
		}
	}
	return nil
}

// GetGroupSnapshot reports group snapshot id: NOT_FOUND when none of its
// LVs is left.
func (m *Manager) GetGroupSnapshot(ctx context.Context, r lvm.Reads, id volume.ID) (volume.GroupSnapshot, error) {
	vg, key, err := m.groupOf(id)
	if err != nil {
		return volume.GroupSnapshot{}, err
	}
	lvs, err := m.groupLVs(ctx, r, vg, key)
	if err != nil {
		return volume.GroupSnapshot{}, err
	}
	out := volume.GroupSnapshot{ID: id}
	for _, lv := range lvs {
		if !isFrozen(lv) && !lv.HasTag(tagDeleting) {
			out.Add(m.snapshotOf(lv))
		}
	}
	if len(out.Snapshots) == 0 {
		return volume.GroupSnapshot{}, fmt.Errorf("group snapshot %s: %w", id, volume.ErrSnapshotNotFound)
	}
	size, _ := strconv.Atoi(tagValue(lvs[0], tagGroupSizePrefix))
	out.Ready = out.Ready && len(out.Snapshots) == size
	return out, nil
}

// DeleteGroupSnapshot deletes every LV of group snapshot id: members (a
// copy into one is stopped) and frozen points. A group that is gone is
// deleted already.
func (m *Manager) DeleteGroupSnapshot(ctx context.Context, id volume.ID) error {
	vg, key, err := m.groupOf(id)
	if errors.Is(err, volume.ErrSnapshotNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	lvs, err := m.groupLVs(ctx, lvm.Fresh, vg, key)
	if err != nil {
		return err
	}
	return m.dropGroupLVs(ctx, lvm.Fresh, lvs)
}

// isFrozen: lv is a frozen point.
func isFrozen(lv lvm.LV) bool { return lv.HasTag(tagFrozen) }
