package e2e

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/test/soakmodel"
)

var soakTestNodes = []string{"vm1", "vm2"}

// optionOf is the option of act among os.
func optionOf(t *testing.T, os []soakOption, act soakAct) soakOption {
	t.Helper()
	i := slices.IndexFunc(os, func(o soakOption) bool { return o.act == act })
	if i < 0 {
		t.Fatalf("no option %q", act)
	}
	return os[i]
}

// TestSoakMovesOnlyPlacedIdleClaims: the chooser offers a move only of a
// bound claim no operation holds, with or without its writer, and only
// where there is another VM node to go to.
func TestSoakMovesOnlyPlacedIdleClaims(t *testing.T) {
	thick := &soakmodel.Layout{Name: "carve-thick", Segtype: "linear"}
	m := &soakmodel.Model[*soakClaim]{}
	m.Add(&soakClaim{Volume: soakmodel.Volume{Name: "new", Layout: thick, Node: "vm1"}}) // its first writer not running yet
	m.Add(&soakClaim{Volume: soakmodel.Volume{Name: "expanding", LV: "pv0", Layout: thick, Node: "vm1", Busy: true}})
	if o := optionOf(t, soakOptions(m, soakTestNodes), actMove); o.weight != 0 {
		t.Errorf("a move offered with no bound idle claim: %+v", o)
	}
	m.Add(&soakClaim{Volume: soakmodel.Volume{Name: "idle", LV: "pv1", Layout: thick, Node: "vm2"}})
	m.Add(&soakClaim{Volume: soakmodel.Volume{Name: "writing", LV: "pv2", Layout: thick, Node: "vm1"}, pod: &corev1.Pod{}})
	o := optionOf(t, soakOptions(m, soakTestNodes), actMove)
	var names []string
	for _, c := range o.claims {
		names = append(names, c.Name)
	}
	if o.weight == 0 || !slices.Equal(names, []string{"idle", "writing"}) {
		t.Errorf("move: weight %d of %v, want the idle and the writing claim", o.weight, names)
	}
	if o := optionOf(t, soakOptions(m, soakTestNodes[:1]), actMove); o.weight != 0 {
		t.Errorf("a move offered with one VM node: %+v", o)
	}
}

// TestSoakRestoresAcrossOnlyReadySnapshotsWithRoom: a restore on the
// other node is offered for a ready snapshot no operation holds, on one
// of two VM nodes, while the model has room for a claim.
func TestSoakRestoresAcrossOnlyReadySnapshotsWithRoom(t *testing.T) {
	thin := &soakmodel.Layout{Name: "carve-thin", Segtype: "thin"}
	m := &soakmodel.Model[*soakClaim]{}
	src := &soakClaim{Volume: soakmodel.Volume{Name: "src", LV: "pv1", Layout: thin, Node: "vm1"}}
	m.Add(src)
	pending := soakmodel.NewSnapshot("pending", &src.Volume)
	m.AddSnapshot(pending)
	if o := optionOf(t, soakOptions(m, soakTestNodes), actRestoreAcross); o.weight != 0 {
		t.Errorf("a restore across offered of a snapshot not ready: %+v", o)
	}
	ready := soakmodel.NewSnapshot("ready", &src.Volume)
	ready.LV = "snap-1"
	m.AddSnapshot(ready)
	o := optionOf(t, soakOptions(m, soakTestNodes), actRestoreAcross)
	if o.weight == 0 || len(o.snaps) != 1 || o.snaps[0] != ready || soakmodel.Other(soakTestNodes, ready.Node) != "vm2" {
		t.Errorf("restore across: %+v, want the ready snapshot, to vm2", o)
	}
	if o := optionOf(t, soakOptions(m, soakTestNodes[:1]), actRestoreAcross); o.weight != 0 {
		t.Errorf("a restore across offered with one VM node: %+v", o)
	}
	for len(m.Volumes) < soakMaxClaims {
		m.Add(&soakClaim{Volume: soakmodel.Volume{Name: m.Next("soak"), Layout: thin, Node: "vm2"}})
	}
	for _, act := range []soakAct{actRestoreAcross, actRestore, actCreate} {
		if o := optionOf(t, soakOptions(m, soakTestNodes), act); o.weight != 0 {
			t.Errorf("%s offered with the model full: %+v", act, o)
		}
	}
}

// TestSoakKillsEveryCarveOfTheSoak: the kills take carve controller and
// carve node on each VM node, alone and with the controller, and both
// VM nodes' at once; never carve node on the host node.
func TestSoakKillsEveryCarveOfTheSoak(t *testing.T) {
	seen := map[string]int{}
	for _, pick := range soakKillChoices("host", soakTestNodes) {
		for _, target := range pick {
			seen[target.String()]++
			if target.component == "node" && target.node == "host" || target.component == "controller" && target.node != "host" {
				t.Errorf("kill of %+v", target)
			}
		}
	}
	for _, want := range []string{"controller", "node vm1", "node vm2"} {
		if seen[want] < 2 {
			t.Errorf("carve %s killed in %d picks, want 2 or more (%v)", want, seen[want], seen)
		}
	}
}

func TestMovePhaseReached(t *testing.T) {
	for _, c := range []struct {
		phase, want v1alpha1.MovePhase
		reached     bool
	}{
		{"", v1alpha1.MoveReadyToCutOver, false},
		{v1alpha1.MoveCopy, v1alpha1.MoveReadyToCutOver, false},
		{v1alpha1.MoveReadyToCutOver, v1alpha1.MoveReadyToCutOver, true},
		{v1alpha1.MoveSwap, v1alpha1.MoveReadyToCutOver, true},
		{v1alpha1.MoveMoved, v1alpha1.MoveReadyToCutOver, true},
		{v1alpha1.MoveSwap, v1alpha1.MoveMoved, false},
		{v1alpha1.MoveMoved, v1alpha1.MoveMoved, true},
		{v1alpha1.MoveFailed, v1alpha1.MoveReadyToCutOver, false},
		{v1alpha1.MoveFailed, v1alpha1.MoveMoved, false},
	} {
		if got := movePhaseReached(c.phase, c.want); got != c.reached {
			t.Errorf("movePhaseReached(%q, %q) = %v", c.phase, c.want, got)
		}
	}
}
