package backend

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
)

// adoptRecord makes the LogicalVolume of a volume that has none: a static
// PersistentVolume names an LV (its volume handle, the ID) that no
// resource records, such as one Carve carved before its cluster was
// rebuilt, or one an administrator tagged for import. Attaching such a
// volume is the deliberate act that adopts it: the resource says so
// (spec.adopted), and the node agent takes the LV over as it is, never
// creating one (lvmvol.AdoptVolume: an LV not Carve's only with its
// import tag). An ID whose LV is not there comes back NOT_FOUND from the
// agent, and dropUnadopted removes the resource again.
func (b *Backend) adoptRecord(ctx context.Context, id volume.ID) error {
	if errs := validation.IsDNS1123Subdomain(id.LV); len(errs) > 0 {
		return fmt.Errorf("LV %s cannot be adopted: its name is no Kubernetes object name (%s); rename it (lvrename): %w",
			id, strings.Join(errs, "; "), volume.ErrInvalidArgument)
	}
	lv := &v1alpha1.LogicalVolume{
		ObjectMeta: metav1.ObjectMeta{Name: id.LV, Finalizers: []string{v1alpha1.VolumeFinalizer}},
		// The size is the LV's: 1 byte asks for nothing more (the API
		// wants a size), and an expansion raises it.
		Spec: v1alpha1.LogicalVolumeSpec{Name: id.LV, NodeName: id.Node, VolumeGroup: id.VG, Adopted: true,
			RequiredBytes: 1, ParamsDigest: "adopted"},
	}
	if err := b.Client.Create(ctx, lv); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("adopt %s: %w", id, err)
	}
	klog.InfoS("Adopting a volume no LogicalVolume records, for its static PersistentVolume", "volume", id)
	return nil
}

// dropUnadopted removes the resource adoptRecord made when the agent did
// not adopt its LV (none there, one not tagged for import, a timeout), so
// that a wrong volume handle leaves nothing behind and the CO's retry
// adopts afresh (after an administrator's lvchange --addtag, say). A
// resource that adopted its LV (a volume ID) stays: the delete is
// conditional on the version read, so an adoption finished in between
// makes it fail; and the agent removes no LV for an adopted resource
// without a volume ID (VolumeReconciler.remove).
func (b *Backend) dropUnadopted(ctx context.Context, id volume.ID) {
	lv, err := b.lookup(ctx, id)
	if err != nil || !lv.Spec.Adopted || lv.Status.VolumeID != "" {
		return
	}
	rv := lv.ResourceVersion
	if err := b.Client.Delete(ctx, lv, client.Preconditions{ResourceVersion: &rv}); err != nil && !apierrors.IsNotFound(err) {
		klog.ErrorS(err, "Dropping a failed adoption's resource failed", "logicalVolume", lv.Name)
	}
}
