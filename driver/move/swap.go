package move

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	carvecsi "carve.dev/carve/driver/csi"
	"carve.dev/carve/driver/volume"
)

// The swap puts the claim, under its own name, on the target: a
// PersistentVolume's volume handle and node affinity cannot change, nor
// a claim's name, so it is a new PersistentVolume and the claim made
// again. Its steps, in order, each reading what the ones before leave
// (never what a crashed reconcile meant to do), and each skipping
// itself when its outcome holds already:
//
//	step           reads                                  leaves
//	(record)       status.persistentVolume                the new PV's name (the move's) recorded
//	makePV         the new PV; else the claim, bound to   the new PV, pre-bound to the claim's name,
//	               the old PV, and the old PV              carrying the claim as it was and the old PV's name
//	retain         the old PV                             the old PV Retain: the claim's deletion keeps the volume
//	dropClaim      the claim: on the old PV               the claim deleted (gone once no pod uses it)
//	makeClaim      the claim: gone                        the claim made again from the new PV's copy,
//	                                                      volumeName the new PV
//	awaitBound     the claim: on the new PV               bound (the PV controller's work)
//	dropOldPV      the old PV                             deleted
//	dropSource     the source's LogicalVolume             gone, its hold with it (the agent's lvremove)
//	dropSnapshots  S1, S2                                 gone
//	(done)                                                movedTime, Moved
//
// A crash between any two: the new PV is there or not, and carries what
// the later steps need of the claim and the old PV, which are gone by
// then; the claim is on the old PV (not yet dropped), gone (make it), or
// on the new PV (made: the steps before skip themselves). The old PV
// keeps the claim's data until the new claim is bound: at no point are
// both the old claim and its Retain gone with the volume still needed.
// A pod that waits for the claim meanwhile waits as for any unbound
// claim; the StatefulSet's pod is scheduled on toNode once it is bound.

// Annotations of the new PersistentVolume, for the steps after makePV.
const (
	// annotationClaim: the claim as it was (its labels, its user's
	// annotations, its owners and spec), JSON, to make it again from.
	annotationClaim = "lvm.carve.dev/move-claim"
	// annotationOldPV: the PersistentVolume the claim was bound to.
	annotationOldPV = "lvm.carve.dev/moved-from"
)

// swapping is what the swap's steps share: the new PV, once read.
type swapping struct {
	pv    *corev1.PersistentVolume
	claim corev1.PersistentVolumeClaim // as it was, from the new PV
	oldPV string
}

// swap runs the steps in order until one must wait.
func (r *Reconciler) swap(ctx context.Context, m *v1alpha1.VolumeMove) (time.Duration, error) {
	if m.Status.PersistentVolume == "" {
		m.Status.PersistentVolume = targetName(m)
		return 0, nil // recorded before it is made
	}
	s := &swapping{}
	for _, step := range []func(context.Context, *v1alpha1.VolumeMove, *swapping) (bool, error){
		r.makePV, r.retain, r.dropClaim, r.makeClaim, r.awaitBound, r.dropOldPV, r.dropSource, r.dropSnapshots,
	} {
		if done, err := step(ctx, m, s); err != nil || !done {
			return poll, err
		}
	}
	now := metav1.Now()
	m.Status.Phase, m.Status.MovedTime, m.Status.Message = v1alpha1.MoveMoved, &now, ""
	down := downtime(m)
	klog.InfoS("Moved a claim", "volumeMove", key(m), "to", m.Spec.ToNode, "downtime", down)
	r.emit(ctx, m, corev1.EventTypeNormal, ReasonMoved, "claim %s is on node %s now (PersistentVolume %s); it was down %s",
		m.Spec.Claim, m.Spec.ToNode, m.Status.PersistentVolume, down)
	return 0, nil
}

// downtime is from the cut-over to the move's end.
func downtime(m *v1alpha1.VolumeMove) time.Duration {
	if m.Status.CutOverTime == nil || m.Status.MovedTime == nil {
		return 0
	}
	return m.Status.MovedTime.Sub(m.Status.CutOverTime.Time).Round(time.Second)
}

// makePV makes the new PersistentVolume, or reads it.
func (r *Reconciler) makePV(ctx context.Context, m *v1alpha1.VolumeMove, s *swapping) (bool, error) {
	s.pv = &corev1.PersistentVolume{}
	err := r.API.Get(ctx, client.ObjectKey{Name: m.Status.PersistentVolume}, s.pv)
	if apierrors.IsNotFound(err) {
		if s.pv, err = r.newPV(ctx, m); err != nil {
			return false, err
		}
		if err = r.Client.Create(ctx, s.pv); apierrors.IsAlreadyExists(err) {
			err = r.API.Get(ctx, client.ObjectKey{Name: m.Status.PersistentVolume}, s.pv)
		}
	}
	if err != nil {
		return false, fmt.Errorf("the new PersistentVolume %s of VolumeMove %s: %w", m.Status.PersistentVolume, key(m), err)
	}
	s.oldPV = s.pv.Annotations[annotationOldPV]
	if err := json.Unmarshal([]byte(s.pv.Annotations[annotationClaim]), &s.claim); err != nil {
		return false, fmt.Errorf("PersistentVolume %s carries no claim of VolumeMove %s to make again: %w", s.pv.Name, key(m), err)
	}
	if s.oldPV == "" {
		return false, fmt.Errorf("PersistentVolume %s does not name the one VolumeMove %s moves from", s.pv.Name, key(m))
	}
	return true, nil
}

// newPV is the target's PersistentVolume: the old one's class, capacity,
// modes, mount options, reclaim policy and CSI attributes (its secrets:
// the target holds the same LUKS2 header), toNode's affinity, pre-bound
// to the claim's name.
func (r *Reconciler) newPV(ctx context.Context, m *v1alpha1.VolumeMove) (*corev1.PersistentVolume, error) {
	var claim corev1.PersistentVolumeClaim
	if err := r.API.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.Claim}, &claim); err != nil {
		return nil, fmt.Errorf("claim %s of VolumeMove %s: %w", m.Spec.Claim, key(m), err)
	}
	var old corev1.PersistentVolume
	if err := r.API.Get(ctx, client.ObjectKey{Name: claim.Spec.VolumeName}, &old); err != nil {
		return nil, fmt.Errorf("PersistentVolume %s of claim %s: %w", claim.Spec.VolumeName, m.Spec.Claim, err)
	}
	target, err := volume.ParseID(m.Status.TargetVolumeID)
	if err != nil {
		return nil, fmt.Errorf("the target of VolumeMove %s: %w", key(m), err)
	}
	if old.Spec.CSI == nil || old.Spec.CSI.VolumeHandle != m.Status.SourceVolumeID {
		return nil, fmt.Errorf("claim %s of VolumeMove %s is not on its source %s any more (PersistentVolume %s)",
			m.Spec.Claim, key(m), m.Status.SourceVolumeID, old.Name)
	}
	kept, err := json.Marshal(claimAsItWas(&claim))
	if err != nil {
		return nil, err
	}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: m.Status.PersistentVolume,
		Labels:      old.Labels,
		Annotations: map[string]string{annotationClaim: string(kept), annotationOldPV: old.Name}},
		Spec: *old.Spec.DeepCopy()}
	if by := old.Annotations["pv.kubernetes.io/provisioned-by"]; by != "" {
		pv.Annotations["pv.kubernetes.io/provisioned-by"] = by // so that the provisioner deletes it as its own
	}
	pv.Spec.CSI.VolumeHandle = target.String()
	if _, ok := pv.Spec.CSI.VolumeAttributes[carvecsi.ParamVolumeGroup]; ok {
		pv.Spec.CSI.VolumeAttributes[carvecsi.ParamVolumeGroup] = target.VG
	}
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: m.Namespace, Name: m.Spec.Claim}
	pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: carvecsi.TopologyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{target.Node}}},
	}}}}
	return pv, nil
}

// claimAsItWas is what of the claim is made again: its user's labels,
// annotations and owners (not a Pod's, which a StatefulSet sets on a
// condemned pod's claim), and its spec without what bound it (its
// volume, its selector, its data source: the data is on the target).
func claimAsItWas(c *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	out := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Labels: c.Labels, Annotations: map[string]string{}}}
	for k, v := range c.Annotations {
		if !systemAnnotation(k) {
			out.Annotations[k] = v
		}
	}
	for _, o := range c.OwnerReferences {
		if o.Kind != "Pod" {
			out.OwnerReferences = append(out.OwnerReferences, o)
		}
	}
	out.Spec = corev1.PersistentVolumeClaimSpec{AccessModes: c.Spec.AccessModes, Resources: c.Spec.Resources,
		StorageClassName: c.Spec.StorageClassName, VolumeMode: c.Spec.VolumeMode, VolumeAttributesClassName: c.Spec.VolumeAttributesClassName}
	return out
}

// systemAnnotation: Kubernetes' binding and provisioning marks, which
// the new claim gets from its own binding.
func systemAnnotation(k string) bool {
	for _, p := range []string{"pv.kubernetes.io/", "volume.kubernetes.io/", "volume.beta.kubernetes.io/"} {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// retain sets the old PV's reclaim policy to Retain, so that deleting the
// claim leaves the volume (the new PV keeps the policy it had).
func (r *Reconciler) retain(ctx context.Context, m *v1alpha1.VolumeMove, s *swapping) (bool, error) {
	var old corev1.PersistentVolume
	err := r.API.Get(ctx, client.ObjectKey{Name: s.oldPV}, &old)
	if apierrors.IsNotFound(err) || (err == nil && old.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRetain) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("PersistentVolume %s of VolumeMove %s: %w", s.oldPV, key(m), err)
	}
	before := old.DeepCopy()
	old.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	if err := r.Client.Patch(ctx, &old, client.MergeFrom(before)); err != nil {
		return false, fmt.Errorf("retain PersistentVolume %s of VolumeMove %s: %w", s.oldPV, key(m), err)
	}
	return true, nil
}

// dropClaim deletes the claim while it is on the old PV. Another claim of
// its name (not the old, not the new) is someone else's: the move waits.
func (r *Reconciler) dropClaim(ctx context.Context, m *v1alpha1.VolumeMove, s *swapping) (bool, error) {
	var c corev1.PersistentVolumeClaim
	err := r.API.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.Claim}, &c)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("claim %s of VolumeMove %s: %w", m.Spec.Claim, key(m), err)
	case c.Spec.VolumeName == s.pv.Name:
		return true, nil
	case c.Spec.VolumeName != s.oldPV:
		m.Status.Message = fmt.Sprintf("a claim %s that is not the one moved was made meanwhile (volume %q): delete it", m.Spec.Claim, c.Spec.VolumeName)
		return false, nil
	case c.DeletionTimestamp.IsZero():
		err := r.Client.Delete(ctx, &c, client.Preconditions{UID: &c.UID})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("delete claim %s of VolumeMove %s: %w", m.Spec.Claim, key(m), err)
		}
	}
	m.Status.Message = fmt.Sprintf("claim %s is being deleted, to be made again on node %s", m.Spec.Claim, m.Spec.ToNode)
	return false, nil
}

// makeClaim makes the claim again, as it was, bound to the new PV.
func (r *Reconciler) makeClaim(ctx context.Context, m *v1alpha1.VolumeMove, s *swapping) (bool, error) {
	var c corev1.PersistentVolumeClaim
	err := r.API.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.Claim}, &c)
	if err == nil {
		return c.Spec.VolumeName == s.pv.Name, nil // dropClaim said which
	}
	if !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("claim %s of VolumeMove %s: %w", m.Spec.Claim, key(m), err)
	}
	again := s.claim.DeepCopy()
	again.Namespace, again.Name, again.Spec.VolumeName = m.Namespace, m.Spec.Claim, s.pv.Name
	if err := r.Client.Create(ctx, again); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("make claim %s of VolumeMove %s again: %w", m.Spec.Claim, key(m), err)
	}
	klog.InfoS("Made a moved claim again on its new PersistentVolume", "volumeMove", key(m), "persistentVolume", s.pv.Name)
	return false, nil
}

// awaitBound waits for the PV controller to bind the claim to the new PV.
func (r *Reconciler) awaitBound(ctx context.Context, m *v1alpha1.VolumeMove, s *swapping) (bool, error) {
	var c corev1.PersistentVolumeClaim
	if err := r.API.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.Claim}, &c); err != nil {
		return false, fmt.Errorf("claim %s of VolumeMove %s: %w", m.Spec.Claim, key(m), err)
	}
	if c.Status.Phase == corev1.ClaimBound && c.Spec.VolumeName == s.pv.Name {
		return true, nil
	}
	m.Status.Message = fmt.Sprintf("claim %s is made again, waiting for it to be bound to PersistentVolume %s", m.Spec.Claim, s.pv.Name)
	return false, nil
}

// dropOldPV deletes the old PV, Retain: the volume goes by dropSource.
// Its deletion is not waited for (its finalizers are Kubernetes').
func (r *Reconciler) dropOldPV(ctx context.Context, m *v1alpha1.VolumeMove, s *swapping) (bool, error) {
	var old corev1.PersistentVolume
	err := r.API.Get(ctx, client.ObjectKey{Name: s.oldPV}, &old)
	if apierrors.IsNotFound(err) || (err == nil && !old.DeletionTimestamp.IsZero()) {
		return true, nil
	}
	if err == nil && old.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		err = fmt.Errorf("it is not Retain")
	}
	if err == nil {
		err = client.IgnoreNotFound(r.Client.Delete(ctx, &old, client.Preconditions{UID: &old.UID}))
	}
	if err != nil {
		return false, fmt.Errorf("delete PersistentVolume %s of VolumeMove %s: %w", s.oldPV, key(m), err)
	}
	return true, nil
}

// dropSource deletes the source volume through the backend (which
// refuses one still attached) and waits for its agent to remove it.
func (r *Reconciler) dropSource(ctx context.Context, m *v1alpha1.VolumeMove, _ *swapping) (bool, error) {
	id, err := volume.ParseID(m.Status.SourceVolumeID)
	if err != nil {
		return false, fmt.Errorf("status of VolumeMove %s: %w", key(m), err)
	}
	call, cancel := context.WithTimeout(ctx, callTime)
	defer cancel()
	err = r.Backend.DeleteVolume(call, id)
	if err != nil && !pending(err) {
		return false, fmt.Errorf("delete the moved volume %s of VolumeMove %s: %w", id, key(m), err)
	}
	if err != nil {
		m.Status.Message = fmt.Sprintf("deleting the volume %s on node %s", id, id.Node)
	}
	return err == nil, nil
}

// dropSnapshots deletes S1 and S2.
func (r *Reconciler) dropSnapshots(ctx context.Context, m *v1alpha1.VolumeMove, _ *swapping) (bool, error) {
	return r.dropAll(ctx, m, snapshotResource(secondSnapshotName(m)), snapshotResource(firstSnapshotName(m)))
}
