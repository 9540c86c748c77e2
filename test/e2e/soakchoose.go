package e2e

// What the cluster soak may do next, and what it kills: not behind the
// e2e build tag, so that the chooser's rules have unit tests that run
// with the unit tests (soakchoose_test.go). The soak (soakmodel_test.go)
// picks among these by weight with the seed's source, and does it.

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/test/soakmodel"
)

// The model's bounds: operations in flight at once, live claims and
// snapshots. Each VM node is one emulated core: more at once only queues.
const (
	soakInFlight  = 3
	soakMaxClaims = 5
	soakMaxSnaps  = 3
)

// soakClaim is a claim the soak made: a volume of the model (its size the
// bytes asked for, the last expansion's; its LV its PV's name; its ID the
// PV's CSI volume handle, node/vg/lv; its node the VM node its pods are
// pinned to, where its volume is), attached while a writer runs.
type soakClaim struct {
	soakmodel.Volume
	pod  *corev1.Pod // its writer, while one runs
	pods int         // writers started, naming the next
}

// soakAct is a kind of operation the soak starts: on a claim, on a
// snapshot, or a new claim.
type soakAct int

const (
	actCreate soakAct = iota
	actStartPod
	actStopPod
	actDeleteClaim
	actSnapshot
	actExpand
	actMove
	actRestore
	actRestoreAcross
	actDeleteSnapshot
)

// soakActNames are what the log and the failures call the acts, in
// their order.
var soakActNames = []string{"create a claim", "start a writer", "delete a writer", "delete a claim", "snapshot", "expand",
	"move to the other node", "restore", "restore on the other node", "delete a snapshot"}

func (a soakAct) String() string { return soakActNames[a] }

// soakOption is an operation the model allows now (weight > 0) or not
// (0), and the claims or snapshots it may act on: one of them, at random.
type soakOption struct {
	act    soakAct
	weight int
	claims []*soakClaim
	snaps  []*soakmodel.Snapshot
}

// soakOptions are the operations and their weights as the model stands,
// its volumes on nodes (the VM nodes). A restore across nodes needs a
// ready snapshot on one of two nodes, and room for its claim; a move, a
// bound claim no operation holds, writer or none, on one of two nodes.
func soakOptions(m *soakmodel.Model[*soakClaim], nodes []string) []soakOption {
	withPod := m.Idle(func(c *soakClaim) bool { return c.pod != nil })
	idle := m.Idle(func(c *soakClaim) bool { return c.pod == nil })
	bound := m.Idle(func(c *soakClaim) bool { return c.LV != "" })
	movable := m.Movable(nodes, func(*soakClaim) bool { return true })
	ready := m.IdleSnapshots(func(sn *soakmodel.Snapshot) bool { return sn.LV != "" })
	far := m.IdleSnapshots(func(sn *soakmodel.Snapshot) bool { return sn.LV != "" && soakmodel.Other(nodes, sn.Node) != "" })
	unused := m.IdleSnapshots(func(sn *soakmodel.Snapshot) bool { return sn.LV != "" && sn.Restores == 0 })
	room := len(m.Volumes) < soakMaxClaims
	full := 1 // deletions weigh more once the model is full
	if !room {
		full = 3
	}
	fresh := 1 // new claims weigh less once there are a few, so that restores get room
	if len(m.Volumes) < 3 {
		fresh = 3
	}
	when := soakmodel.When
	return []soakOption{
		{act: actCreate, weight: when(room, fresh)},
		{act: actStartPod, weight: when(len(idle) > 0, 3), claims: idle},
		{act: actStopPod, weight: when(len(withPod) > 0, 2), claims: withPod},
		{act: actDeleteClaim, weight: when(len(idle) > 0, full), claims: idle},
		{act: actSnapshot, weight: when(len(bound) > 0 && len(m.Snapshots) < soakMaxSnaps, 2), claims: bound},
		{act: actRestore, weight: when(len(ready) > 0 && room, 3), snaps: ready},
		{act: actRestoreAcross, weight: when(len(far) > 0 && room, 2), snaps: far},
		{act: actExpand, weight: when(len(withPod) > 0, 2), claims: withPod},
		{act: actDeleteSnapshot, weight: when(len(unused) > 0, full), snaps: unused},
		{act: actMove, weight: when(len(movable) > 0, 2), claims: movable},
	}
}

// soakTarget is a carve container the soak kills: its component's pod on
// node.
type soakTarget struct{ component, node string }

func (t soakTarget) String() string {
	if t.component == "controller" {
		return "controller"
	}
	return t.component + " " + t.node
}

// soakKillChoices are the kills to pick from, each one or more containers
// at once: carve controller on host (which runs the move controller),
// carve node on each VM node (a transfer's sender or receiver, a move's
// source or target), each with the controller, and every VM node's at
// once (both ends of a transfer). carve node on host carves nothing of
// the soak's and is left alone. The controller alone is twice as likely
// as either carve node alone.
func soakKillChoices(host string, vms []string) [][]soakTarget {
	targets := soakKillTargets(host, vms)
	ctl, nodes := targets[0], targets[1:]
	out := [][]soakTarget{{ctl}, {ctl}}
	for _, node := range nodes {
		out = append(out, []soakTarget{node}, []soakTarget{ctl, node})
	}
	return append(out, nodes)
}

// soakKillTargets are the containers the soak kills, each once: carve
// controller, then carve node on each VM node.
func soakKillTargets(host string, vms []string) []soakTarget {
	out := []soakTarget{{"controller", host}}
	for _, n := range vms {
		out = append(out, soakTarget{"node", n})
	}
	return out
}

// movePhases are a VolumeMove's phases in the order it walks them; Failed
// is none of them: it ends the walk.
var movePhases = []v1alpha1.MovePhase{"", v1alpha1.MoveCopy, v1alpha1.MoveReadyToCutOver, v1alpha1.MoveCutOver,
	v1alpha1.MoveCatchUp, v1alpha1.MoveSwap, v1alpha1.MoveMoved}

// movePhaseReached tells whether a move at phase is at want or past it.
// A move whose claim has no pod walks on from ReadyToCutOver by itself,
// so the soak may first see it past that.
func movePhaseReached(phase, want v1alpha1.MovePhase) bool {
	i, j := slices.Index(movePhases, phase), slices.Index(movePhases, want)
	return i >= 0 && j >= 0 && i >= j
}
