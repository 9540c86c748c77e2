package volume

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Requester is the CO's object a call is made for: the claim a volume is
// created for, the VolumeSnapshot a snapshot is taken for. Kubernetes'
// sidecars name it in the call's parameters (--extra-create-metadata). The
// node agent tells its tenant what happens to it (events in the object's
// namespace), beside the cluster-scoped resource only operators see.
type Requester struct {
	// Kind is RequesterClaim or RequesterSnapshot.
	Kind      string
	Namespace string
	Name      string
}

// The kinds of requesters.
const (
	RequesterClaim    = "PersistentVolumeClaim"
	RequesterSnapshot = "VolumeSnapshot"
)

// The parameters csi-provisioner and csi-snapshotter add with
// --extra-create-metadata.
const (
	ParamClaimName         = COParamPrefix + "pvc/name"
	ParamClaimNamespace    = COParamPrefix + "pvc/namespace"
	ParamSnapshotName      = COParamPrefix + "volumesnapshot/name"
	ParamSnapshotNamespace = COParamPrefix + "volumesnapshot/namespace"
)

// RequesterFrom reads the requester of kind from a call's parameters: nil
// when they do not name both its namespace and name (a CO without the
// metadata, csi-sanity; the metadata only adds events, so a part of it is
// no reason to refuse a volume), an error when they hold names Kubernetes
// cannot.
func RequesterFrom(params map[string]string, kind string) (*Requester, error) {
	nameKey, nsKey := ParamClaimName, ParamClaimNamespace
	if kind == RequesterSnapshot {
		nameKey, nsKey = ParamSnapshotName, ParamSnapshotNamespace
	}
	name, hasName := params[nameKey]
	ns, hasNS := params[nsKey]
	if !hasName || !hasNS {
		return nil, nil
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return nil, fmt.Errorf("parameter %s=%q: %v", nsKey, ns, errs)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("parameter %s=%q: %v", nameKey, name, errs)
	}
	return &Requester{Kind: kind, Namespace: ns, Name: name}, nil
}

type requesterKey struct{}

// WithRequester is ctx carrying r (nil: none). The requester is the call's
// context, not part of what is carved: it changes nothing on the node and
// nothing in a retry's comparison.
func WithRequester(ctx context.Context, r *Requester) context.Context {
	if r == nil {
		return ctx
	}
	return context.WithValue(ctx, requesterKey{}, *r)
}

// RequesterOf is the requester ctx carries, nil for none.
func RequesterOf(ctx context.Context) *Requester {
	if r, ok := ctx.Value(requesterKey{}).(Requester); ok {
		return &r
	}
	return nil
}
