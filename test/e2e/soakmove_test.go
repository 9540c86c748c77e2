//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/test/soakmodel"
)

// A claim's move to the other VM node, as the runbook has it
// (docs/moves.md): create a VolumeMove; at ReadyToCutOver stop the
// workload (the writer pod, read once more, deleted); wait for Moved; the
// claim, under its name, is then bound to a new PV on the other node,
// where its next writer is pinned and must read back every acknowledged
// write. Two operations: the copy (the move made to ReadyToCutOver, the
// workload running) and the cut-over (the pod deleted to the move done
// and deleted, the old PV, LogicalVolume and the move's snapshots gone).

// soakMove is a move in flight.
type soakMove struct {
	c        *soakClaim
	m        *v1alpha1.VolumeMove
	from, to string
	oldPV    string
	began    time.Time
	status   v1alpha1.VolumeMoveStatus  // as last read
	moved    *v1alpha1.VolumeMoveStatus // once Moved, before the move is deleted
}

// move starts c's move to the other VM node; c's writer, if it has one,
// runs on through the copy.
func (s *clusterSoak) move(c *soakClaim) {
	c.Busy = true
	mv := &soakMove{c: c, from: c.Node, to: soakmodel.Other(s.nodes, c.Node), oldPV: c.LV, began: time.Now()}
	mv.m = &v1alpha1.VolumeMove{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: s.model.Next(c.Name + "-move"),
		Labels: map[string]string{soakLabel: "true"}}, Spec: v1alpha1.VolumeMoveSpec{Claim: c.Name, ToNode: mv.to}}
	create(s.t, mv.m)
	busy := "idle"
	if c.pod != nil {
		busy = "writer " + c.pod.Name + " running"
	}
	s.push(&soakOp{kind: "move " + c.Layout.Name + ": copy", across: true, about: []string{mv.m.Name, c.Name, c.LV},
		what:    fmt.Sprintf("move claim %s (%s, %d MiB, %s) from %s to %s: VolumeMove %s to ReadyToCutOver", c.Name, c.Layout.Name, c.Size/mi, busy, mv.from, mv.to, mv.m.Name),
		reached: func(ctx context.Context) (bool, error) { return s.moveAt(ctx, mv, v1alpha1.MoveReadyToCutOver) },
		done:    func() { s.cutOver(mv) }})
}

// moveAt reads mv's VolumeMove and tells whether it is at want or past
// it. Failed is final (driver/move undoes the move and walks no
// further), and a kill is no excuse for it: the controller resumes a
// move after a crash, and carve node a transfer. So a Failed move fails
// the soak with its message, and the kills made meanwhile, which tell a
// kill's fault (a bug in resuming) from another.
func (s *clusterSoak) moveAt(ctx context.Context, mv *soakMove, want v1alpha1.MovePhase) (bool, error) {
	var m v1alpha1.VolumeMove
	if err := h.kc.Get(ctx, client.ObjectKeyFromObject(mv.m), &m); err != nil {
		return false, err
	}
	mv.status = m.Status
	if m.Status.Phase == v1alpha1.MoveFailed {
		return false, &soakFailure{fmt.Sprintf("VolumeMove %s failed: %s (kills since it was made: %s)", m.Name, m.Status.Message, s.killsSince(mv.began))}
	}
	return movePhaseReached(m.Status.Phase, want), fmt.Errorf("VolumeMove %s: %q, %d%% copied: %s", m.Name, m.Status.Phase, m.Status.CopiedPercent, m.Status.Message)
}

// cutOver stops c's workload, as the user does at ReadyToCutOver: the
// writer is read one last time (what it acknowledged must be on the other
// node after), then deleted. A claim without one walks on by itself.
func (s *clusterSoak) cutOver(mv *soakMove) {
	c, p := mv.c, mv.c.pod
	if p != nil {
		s.verify(c, "at its move's cut-over")
		if err := h.kc.Delete(context.Background(), p); client.IgnoreNotFound(err) != nil {
			s.t.Fatal(err)
		}
	}
	about := []string{mv.m.Name, c.Name, mv.oldPV}
	if p != nil {
		about = append(about, p.Name)
	}
	s.push(&soakOp{kind: "move " + c.Layout.Name + ": cut-over", across: true, about: about,
		what:    fmt.Sprintf("cut-over of claim %s to %s: its writer deleted, VolumeMove %s to Moved, then deleted", c.Name, mv.to, mv.m.Name),
		reached: func(ctx context.Context) (bool, error) { return s.moveDone(ctx, mv, p) },
		done:    func() { s.afterMove(mv) }})
}

// moveDone: mv's VolumeMove is Moved (its status then kept, and the
// move deleted: done, it has nothing left to undo), and the move, the
// old PV, its LogicalVolume, the move's snapshots, the writer p deleted
// at the cut-over (nil: none) and its VolumeAttachment are gone.
func (s *clusterSoak) moveDone(ctx context.Context, mv *soakMove, p *corev1.Pod) (bool, error) {
	if mv.moved == nil {
		if ok, err := s.moveAt(ctx, mv, v1alpha1.MoveMoved); !ok {
			return false, err
		}
		if err := h.kc.Delete(ctx, mv.m); client.IgnoreNotFound(err) != nil {
			return false, err
		}
		mv.moved = mv.status.DeepCopy()
	}
	objs := []named{{mv.m.Name, &v1alpha1.VolumeMove{}}, {mv.oldPV, &corev1.PersistentVolume{}}, {mv.oldPV, &v1alpha1.LogicalVolume{}}}
	for _, lv := range moveSnapshotLVs(mv.moved) {
		objs = append(objs, named{lv, &v1alpha1.LogicalVolumeSnapshot{}})
	}
	if p != nil {
		objs = append(objs, named{p.Name, &corev1.Pod{}})
	}
	if ok, err := allGone(ctx, objs...); !ok {
		return false, err
	}
	va, err := volumeAttachment(ctx, mv.oldPV)
	return va == nil && err == nil, err
}

// moveSnapshotLVs are the LVs of a move's snapshots, S1 and S2 (IDs
// node/vg/lv), as far as its status names them.
func moveSnapshotLVs(st *v1alpha1.VolumeMoveStatus) []string {
	var lvs []string
	for _, id := range []string{st.FirstSnapshotID, st.SecondSnapshotID} {
		if i := strings.LastIndex(id, "/"); i >= 0 {
			lvs = append(lvs, id[i+1:])
		}
	}
	return lvs
}

// afterMove: the claim is bound to the move's new PV, on the other node;
// the model has c there (Volume.Moved); the old LV and the move's
// snapshots are gone from the old node. Then c's next writer, pinned to
// the new node, must read back every acknowledged write.
func (s *clusterSoak) afterMove(mv *soakMove) {
	c := mv.c
	ctx := context.Background()
	var claim corev1.PersistentVolumeClaim
	var pv corev1.PersistentVolume
	if err := get(ctx, c.Name, &claim); err != nil {
		s.t.Fatal(err)
	}
	if err := get(ctx, mv.moved.PersistentVolume, &pv); err != nil {
		s.t.Fatalf("the new PV of VolumeMove %s: %v", mv.m.Name, err)
	}
	if claim.Spec.VolumeName != pv.Name || claim.Status.Phase != corev1.ClaimBound {
		s.t.Errorf("moved claim %s: %s to %q, want bound to the move's PV %s", c.Name, claim.Status.Phase, claim.Spec.VolumeName, pv.Name)
	}
	c.pod = nil
	c.Moved(mv.to, pv.Name, pv.Spec.CSI.VolumeHandle)
	s.checkLVGone(mv.oldPV, "of moved claim "+c.Name)
	if l, err := lvOn(mv.to, c.LV); err != nil || l == nil || l.Active != "" {
		s.t.Errorf("moved claim %s: its LV %s on %s: %+v (%v), want it there, inactive until its next pod", c.Name, c.LV, mv.to, l, err)
	}
	for _, lv := range moveSnapshotLVs(mv.moved) {
		if l, err := lvOn(mv.from, lv); err != nil || l != nil {
			s.t.Errorf("VolumeMove %s's snapshot LV %s on %s: %+v (%v), want it gone", mv.m.Name, lv, mv.from, l, err)
		}
	}
	s.stats.Checked("moved: LV on the new node, the old and the move's snapshots gone")
	op := s.startPodAs(c, "start pod after a move", nil)
	op.about = append(op.about, mv.m.Name)
}
