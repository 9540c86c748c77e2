package move

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	carvecsi "carve.dev/carve/driver/csi"
	"carve.dev/carve/driver/volume"
)

// source is the claim a move is of, as the copy reads it: bound to a
// Carve volume on another node than toNode.
type source struct {
	claim *corev1.PersistentVolumeClaim
	pv    *corev1.PersistentVolume
	class *storagev1.StorageClass
	// attributes is the claim's VolumeAttributesClass, nil for none.
	attributes *storagev1.VolumeAttributesClass
	lv         *v1alpha1.LogicalVolume
	id         volume.ID
}

// resolve follows m's claim to its volume, or refuses what cannot be
// moved: a claim that is missing, unbound or not Carve's, a volume on
// toNode already, a toNode that runs no carve node. Once the status
// names the source, the claim must still lead to it.
func (r *Reconciler) resolve(ctx context.Context, m *v1alpha1.VolumeMove) (*source, error) {
	s := &source{claim: &corev1.PersistentVolumeClaim{}, pv: &corev1.PersistentVolume{}}
	name := m.Spec.Claim
	if err := r.get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: name}, s.claim, "claim %s not found in namespace %s", name, m.Namespace); err != nil {
		return nil, err
	}
	if s.claim.Status.Phase != corev1.ClaimBound || s.claim.Spec.VolumeName == "" {
		return nil, refuse("claim %s is not bound to a volume", name)
	}
	if err := r.get(ctx, client.ObjectKey{Name: s.claim.Spec.VolumeName}, s.pv, "the PersistentVolume %s of claim %s is gone", s.claim.Spec.VolumeName, name); err != nil {
		return nil, err
	}
	if err := s.volumeOf(name); err != nil {
		return nil, err
	}
	if old := m.Status.SourceVolumeID; old != "" && old != s.id.String() {
		return nil, refuse("claim %s is bound to volume %s now, not %s, which the move started from", name, s.id, old)
	}
	if s.id.Node == m.Spec.ToNode {
		return nil, refuse("claim %s is on node %s already", name, m.Spec.ToNode)
	}
	if err := r.get(ctx, client.ObjectKey{Name: m.Spec.ToNode}, &v1alpha1.NodeStorage{}, "node %s runs no carve node (it has no NodeStorage)", m.Spec.ToNode); err != nil {
		return nil, err
	}
	var err error
	if s.lv, err = r.sourceVolume(ctx, m, s.id); err != nil {
		return nil, err
	}
	s.class = &storagev1.StorageClass{}
	if err := r.get(ctx, client.ObjectKey{Name: s.pv.Spec.StorageClassName}, s.class,
		"StorageClass %q of claim %s is gone: the new volume is carved with its parameters", s.pv.Spec.StorageClassName, name); err != nil {
		return nil, err
	}
	return s, r.attributesClass(ctx, s)
}

// attributesClass reads the VolumeAttributesClass the claim's volume has
// (status.currentVolumeAttributesClassName: the one applied, not one a
// pending modification asks for), whose parameters the new volume is
// carved with too, as the provisioner passes them to CreateVolume. The
// API protects a class in use from deletion; one gone all the same is
// refused, since the new volume could not have what the old one has.
func (r *Reconciler) attributesClass(ctx context.Context, s *source) error {
	name := ptr.Deref(s.claim.Status.CurrentVolumeAttributesClassName, "")
	if name == "" {
		return nil
	}
	s.attributes = &storagev1.VolumeAttributesClass{}
	return r.get(ctx, client.ObjectKey{Name: name}, s.attributes,
		"VolumeAttributesClass %q of claim %s is gone: the new volume is carved with its parameters", name, s.claim.Name)
}

// mutableParameters are the CreateVolume's mutable parameters: the
// attributes class's, none without one.
func (s *source) mutableParameters() map[string]string {
	if s.attributes == nil {
		return nil
	}
	return s.attributes.Parameters
}

// volumeOf reads the Carve volume of the claim's PersistentVolume.
func (s *source) volumeOf(claim string) error {
	c := s.pv.Spec.CSI
	if c == nil || c.Driver != carvecsi.Name {
		return refuse("claim %s is not a Carve volume (PersistentVolume %s is not of driver %s)", claim, s.pv.Name, carvecsi.Name)
	}
	id, err := volume.ParseID(c.VolumeHandle)
	if err != nil {
		return refuse("claim %s: PersistentVolume %s names no Carve volume: %v", claim, s.pv.Name, err)
	}
	s.id = id
	return nil
}

// sourceVolume reads the source's LogicalVolume afresh; one that a move
// other than m holds is refused.
func (r *Reconciler) sourceVolume(ctx context.Context, m *v1alpha1.VolumeMove, id volume.ID) (*v1alpha1.LogicalVolume, error) {
	var lv v1alpha1.LogicalVolume
	if err := r.get(ctx, client.ObjectKey{Name: id.LV}, &lv, "volume %s of claim %s has no LogicalVolume", id, m.Spec.Claim); err != nil {
		return nil, err
	}
	if lv.Spec.NodeName != id.Node || lv.Spec.VolumeGroup != id.VG || !lv.DeletionTimestamp.IsZero() {
		return nil, refuse("volume %s of claim %s is being deleted or is not where its ID says", id, m.Spec.Claim)
	}
	if by := lv.Annotations[v1alpha1.AnnotationMovedBy]; by != "" && by != key(m) {
		return nil, refuse("volume %s of claim %s is being moved by VolumeMove %s", id, m.Spec.Claim, by)
	}
	return &lv, nil
}

// get reads obj, or refuses with the message when it does not exist.
func (r *Reconciler) get(ctx context.Context, k client.ObjectKey, obj client.Object, missing string, args ...any) error {
	err := r.API.Get(ctx, k, obj)
	if apierrors.IsNotFound(err) {
		return refuse(missing, args...)
	}
	if err != nil {
		return fmt.Errorf("get %T %s: %w", obj, k, err)
	}
	return nil
}
