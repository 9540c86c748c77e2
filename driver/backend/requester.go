package backend

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
)

// requesterKinds: where each kind of requester lives in the API.
var requesterKinds = map[string]schema.GroupVersion{
	volume.RequesterClaim:    {Version: "v1"},
	volume.RequesterSnapshot: {Group: "snapshot.storage.k8s.io", Version: "v1"},
}

// requesterOf resolves the requester the call carries (volume.RequesterOf)
// to the object it names, for its UID: an event names the object it is
// about by UID too, and `kubectl describe` shows only those that match.
// It is nil when the call names none, or when the object cannot be read
// (gone already, or no permission): the agent's events then stay on the
// cluster-scoped resource, which is no reason to fail the call. Only the
// object's metadata is read, once, when the resource is first written.
func (b *Backend) requesterOf(ctx context.Context) *v1alpha1.Requester {
	r := volume.RequesterOf(ctx)
	if r == nil {
		return nil
	}
	gv, ok := requesterKinds[r.Kind]
	if !ok {
		return nil
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gv.WithKind(r.Kind))
	if err := b.Client.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: r.Name}, obj); err != nil {
		klog.InfoS("The requester of a call cannot be read; its tenant gets no events", "kind", r.Kind,
			"namespace", r.Namespace, "name", r.Name, "err", err)
		return nil
	}
	return &v1alpha1.Requester{APIVersion: gv.String(), Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, UID: string(obj.UID)}
}
