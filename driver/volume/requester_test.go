package volume_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"carve.dev/carve/driver/volume"
)

func TestRequesterFrom(t *testing.T) {
	claim := map[string]string{volume.ParamClaimName: "data", volume.ParamClaimNamespace: "team-a", "fsType": "xfs"}
	r, err := volume.RequesterFrom(claim, volume.RequesterClaim)
	if err != nil || r == nil || *r != (volume.Requester{Kind: volume.RequesterClaim, Namespace: "team-a", Name: "data"}) {
		t.Errorf("claim: %+v, %v", r, err)
	}
	snap := map[string]string{volume.ParamSnapshotName: "s.1", volume.ParamSnapshotNamespace: "team-a"}
	if r, err := volume.RequesterFrom(snap, volume.RequesterSnapshot); err != nil || r == nil || r.Name != "s.1" {
		t.Errorf("snapshot: %+v, %v", r, err)
	}
	// The other kind's parameters name nothing of this kind.
	if r, err := volume.RequesterFrom(snap, volume.RequesterClaim); err != nil || r != nil {
		t.Errorf("a snapshot's parameters as a claim's: %+v, %v", r, err)
	}
	for _, part := range []map[string]string{{volume.ParamClaimName: "data"}, {volume.ParamClaimNamespace: "team-a"}} {
		if r, err := volume.RequesterFrom(part, volume.RequesterClaim); err != nil || r != nil {
			t.Errorf("%v: %+v, %v; want none, no error", part, r, err)
		}
	}
	for _, bad := range []map[string]string{
		{volume.ParamClaimName: "Data", volume.ParamClaimNamespace: "team-a"},
		{volume.ParamClaimName: "data", volume.ParamClaimNamespace: "team.a"},
		{volume.ParamClaimName: "", volume.ParamClaimNamespace: "team-a"},
	} {
		if r, err := volume.RequesterFrom(bad, volume.RequesterClaim); err == nil || r != nil {
			t.Errorf("%v: %+v, %v; want an error", bad, r, err)
		}
	}
}

func TestRequesterTravelsInTheContext(t *testing.T) {
	ctx := context.Background()
	if volume.RequesterOf(ctx) != nil || volume.RequesterOf(volume.WithRequester(ctx, nil)) != nil {
		t.Error("a context with no requester has one")
	}
	r := &volume.Requester{Kind: volume.RequesterClaim, Namespace: "n", Name: "c"}
	ctx = volume.WithRequester(ctx, r)
	r.Name = "changed"
	if got := volume.RequesterOf(ctx); got == nil || got.Name != "c" {
		t.Errorf("requester %+v, want the one given, as it was", got)
	}
}

// FuzzRequesterFrom: a requester is read exactly when both parameters are
// there as names Kubernetes can hold; otherwise none, with an error
// exactly when both were there.
func FuzzRequesterFrom(f *testing.F) {
	f.Add("data", "team-a", true, true)
	f.Add("Data", "team-a", true, true)
	f.Add("data", "", false, true)
	f.Add("a/b", "c", true, true)
	f.Fuzz(func(t *testing.T, name, ns string, hasName, hasNS bool) {
		params := map[string]string{}
		if hasName {
			params[volume.ParamClaimName] = name
		}
		if hasNS {
			params[volume.ParamClaimNamespace] = ns
		}
		r, err := volume.RequesterFrom(params, volume.RequesterClaim)
		valid := hasName && hasNS && len(validation.IsDNS1123Subdomain(name)) == 0 && len(validation.IsDNS1123Label(ns)) == 0
		switch {
		case valid && (err != nil || r == nil || r.Name != name || r.Namespace != ns):
			t.Fatalf("%q/%q: %+v, %v", ns, name, r, err)
		case !valid && r != nil:
			t.Fatalf("%v: requester %+v from invalid parameters", params, r)
		case !valid && hasName && hasNS && err == nil:
			t.Fatalf("%v: no error", params)
		case (!hasName || !hasNS) && err != nil:
			t.Fatalf("%v, a part or none: %v", params, err)
		}
	})
}
