// Package soakmodel is what both soaks believe and how they check it: the
// volumes and snapshots a CO was told of, the node each lives on (where
// a driver has several: restores across nodes, moves), each volume's
// acknowledged writes, the LVs and free space that follow from them on
// each node (the model); the verdicts of a check against what a driver
// read (Checker); the run's figures (Stats); and the seeded random
// choices, the knobs and the kill rhythm (Config). Two drivers use it:
// test/soak makes CSI calls against `carve standalone` and SIGKILLs it;
// test/e2e's cluster soak makes Kubernetes objects and SIGKILLs carve's
// containers. What they do to reach a state, and how they read one back,
// stays theirs.
package soakmodel

import (
	"cmp"
	"fmt"
	"slices"

	"carve.dev/carve/lvm"
)

// Layout is a volume type as a StorageClass asks for it, and how lvm2
// lays out its volumes.
type Layout struct {
	Name    string            // how the driver names it: its own word, a StorageClass
	Params  map[string]string // Carve's parameters (nil: a class of the install's own)
	Segtype string            // linear, thin, striped or raid1: lvs's segtype of its LVs
}

// Thin tells a thin layout: its volumes take nothing of the VG's free
// space, the pool is carved already.
func (l *Layout) Thin() bool { return l.Segtype == "thin" }

// LVOptions is what lvm2 is asked for a volume of this layout.
func (l *Layout) LVOptions(size int64) lvm.CreateLVOptions {
	o := lvm.CreateLVOptions{Size: uint64(size)}
	switch l.Segtype {
	case "thin":
		o.ThinPool = cmp.Or(l.Params["thinPool"], "thinpool") // the e2e's classes name theirs in the install
	case "striped":
		o.Stripes = 2
	case "raid1":
		o.Mirrors = 1
	}
	return o
}

// LVSize is the size lvm2 gives a volume of size bytes: a whole number of
// extents, and of rows of extents when striped.
func (l *Layout) LVSize(size, extent int64) int64 {
	if l.Segtype == "striped" {
		extent *= 2
	}
	return (size + extent - 1) / extent * extent
}

// Footprint is what such a volume takes of the VG's free space (lvm's
// own rule: nothing when thin, both legs and a metadata extent each for
// raid1).
func (l *Layout) Footprint(size, extent int64) int64 {
	return int64(lvm.Footprint(l.LVOptions(size), uint64(extent)))
}

// Volume is a volume as the CO knows it.
type Volume struct {
	Name   string
	ID     string // how the driver addresses it: a CSI volume ID, a PV's volume handle
	LV     string
	Layout *Layout
	// Node is the node whose VG holds its LV: where it was placed, or
	// moved to (Moved). "" for a driver of one node (test/soak).
	Node   string
	Size   int64 // bytes the CO was given
	Writes Writes
	// Attached: published to the node, so its LV is active.
	Attached bool
	Busy     bool // an operation on it is under way
}

// Vol is v itself: a driver's volume embeds Volume, and the model reaches
// the shared part through this.
func (v *Volume) Vol() *Volume { return v }

// Moved records a move of v's data to node, done: its writes go with it,
// but it is a new volume there (lv, id), and no longer attached (its
// workload was stopped for the cut-over).
func (v *Volume) Moved(node, lv, id string) {
	v.Node, v.LV, v.ID, v.Attached = node, lv, id, false
}

// Snapshot is a snapshot and the writes its source held when it was
// asked for.
type Snapshot struct {
	Name   string
	ID     string // how the driver addresses it: a CSI snapshot ID, a VolumeSnapshotContent
	LV     string // "" until it is ready
	Source string
	Layout *Layout // the source's
	Node   string  // the source's when it was taken: a snapshot stays where it was taken
	Size   int64   // the LV's: a restore's least size
	Writes Writes
	Busy   bool
	// Restores counts the restores from it under way.
	Restores int
}

// NewSnapshot is a snapshot of v about to be asked for: it must hold
// v's writes acknowledged so far.
func NewSnapshot(name string, v *Volume) *Snapshot {
	return &Snapshot{Name: name, Source: v.Name, Layout: v.Layout, Node: v.Node, Writes: v.Writes.Clone()}
}

// Restore is a volume restored from sn on sn's node: it holds sn's
// writes.
func (sn *Snapshot) Restore(name string, l *Layout, size int64) Volume {
	return sn.RestoreOn(name, l, size, sn.Node)
}

// RestoreOn is a volume restored from sn on node, which may be another
// than sn's (its data copied there): it holds sn's writes all the same.
func (sn *Snapshot) RestoreOn(name string, l *Layout, size int64, node string) Volume {
	return Volume{Name: name, Layout: l, Node: node, Size: size, Writes: sn.Writes.Clone()}
}

// Other is the node of nodes after node (the first after the last): where
// a volume on node moves to, or a snapshot on node is restored across
// nodes. "" when node is none of nodes or the only one: nowhere to go.
func Other(nodes []string, node string) string {
	i := slices.Index(nodes, node)
	if i < 0 || len(nodes) < 2 {
		return ""
	}
	return nodes[(i+1)%len(nodes)]
}

// Model is what the CO has been told: its volumes (a driver's type V,
// which embeds Volume) and snapshots, in the order they were made.
type Model[V interface {
	comparable
	Vol() *Volume
}] struct {
	Volumes   []V
	Snapshots []*Snapshot
	seq       int
}

// Next names a new object.
func (m *Model[V]) Next(prefix string) string {
	m.seq++
	return fmt.Sprintf("%s-%d", prefix, m.seq)
}

func (m *Model[V]) Add(v V) { m.Volumes = append(m.Volumes, v) }

func (m *Model[V]) Remove(v V) {
	m.Volumes = slices.DeleteFunc(m.Volumes, func(x V) bool { return x == v })
}

func (m *Model[V]) AddSnapshot(sn *Snapshot) { m.Snapshots = append(m.Snapshots, sn) }

func (m *Model[V]) RemoveSnapshot(sn *Snapshot) {
	m.Snapshots = slices.DeleteFunc(m.Snapshots, func(x *Snapshot) bool { return x == sn })
}

// Idle are the volumes no operation holds that ok takes.
func (m *Model[V]) Idle(ok func(V) bool) []V {
	return slices.DeleteFunc(slices.Clone(m.Volumes), func(v V) bool { return v.Vol().Busy || !ok(v) })
}

// Movable are the volumes no operation holds that ok takes and that may
// move to another of nodes: placed (their LV known) on one of them.
func (m *Model[V]) Movable(nodes []string, ok func(V) bool) []V {
	return m.Idle(func(v V) bool { return v.Vol().LV != "" && Other(nodes, v.Vol().Node) != "" && ok(v) })
}

// IdleSnapshots are the snapshots no operation holds that ok takes.
func (m *Model[V]) IdleSnapshots(ok func(*Snapshot) bool) []*Snapshot {
	return slices.DeleteFunc(slices.Clone(m.Snapshots), func(sn *Snapshot) bool { return sn.Busy || !ok(sn) })
}

// On is the part of the model on node: its volumes and snapshots there,
// for a driver that checks each node's VG against it (WantLVs, ThickUse,
// HoldsThin). A view to read: what is added to it is not the model's.
func (m *Model[V]) On(node string) *Model[V] {
	return &Model[V]{
		Volumes:   slices.DeleteFunc(slices.Clone(m.Volumes), func(v V) bool { return v.Vol().Node != node }),
		Snapshots: slices.DeleteFunc(slices.Clone(m.Snapshots), func(sn *Snapshot) bool { return sn.Node != node }),
	}
}

// LVState is an LV as the checks compare it.
type LVState struct {
	Segtype string // a thick snapshot is a linear copy, whatever its source's layout
	Size    int64
	Active  bool
}

func (s LVState) String() string { return fmt.Sprintf("%s %d active=%v", s.Segtype, s.Size, s.Active) }

// WantLVs are the LVs the model's volumes and (ready) snapshots must
// have: volumes active exactly while attached, snapshots inactive.
func (m *Model[V]) WantLVs(extent int64) map[string]LVState {
	want := map[string]LVState{}
	for _, x := range m.Volumes {
		v := x.Vol()
		want[v.LV] = LVState{v.Layout.Segtype, v.Layout.LVSize(v.Size, extent), v.Attached}
	}
	for _, sn := range m.Snapshots {
		if sn.LV == "" {
			continue
		}
		seg := "linear"
		if sn.Layout.Thin() {
			seg = "thin"
		}
		want[sn.LV] = LVState{seg, sn.Size, false}
	}
	return want
}

// ThickUse is what the model's volumes and thick snapshots take of the
// VG: its free space before the soak less this is its free space once
// operations settled.
func (m *Model[V]) ThickUse(extent int64) int64 {
	var n int64
	for _, x := range m.Volumes {
		v := x.Vol()
		n += v.Layout.Footprint(v.Size, extent)
	}
	linear := &Layout{Segtype: "linear"}
	for _, sn := range m.Snapshots {
		if !sn.Layout.Thin() {
			n += linear.Footprint(sn.Size, extent)
		}
	}
	return n
}

// HoldsThin tells whether the model has a thin volume or snapshot.
func (m *Model[V]) HoldsThin() bool {
	return slices.ContainsFunc(m.Volumes, func(v V) bool { return v.Vol().Layout.Thin() }) ||
		slices.ContainsFunc(m.Snapshots, func(sn *Snapshot) bool { return sn.Layout.Thin() })
}
