package agent

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/transfer"
	"carve.dev/carve/driver/volume"
)

// openedSources records what the authorizer opened.
type openedSources struct{ ids []volume.ID }

func (o *openedSources) TransferSource(_ context.Context, id volume.ID) (transfer.Source, error) {
	o.ids = append(o.ids, id)
	return nil, nil
}

// TestTransferAuthorizer: node-a's server lets node-b read a snapshot of
// node-a only for a LogicalVolume on node-b made from that snapshot and
// not yet made; every other request is refused alike, read from a real
// API server.
func TestTransferAuthorizer(t *testing.T) {
	const snap = "node-a/vg0/snap-1"
	restoring := func(name, on, from string) *v1alpha1.LogicalVolume {
		return &v1alpha1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.LogicalVolumeSpec{Name: name, NodeName: on, VolumeGroup: "vg0", RequiredBytes: mib, ParamsDigest: "d",
				Source: &v1alpha1.ContentSource{Kind: "snapshot", ID: from}}}
	}
	rg := newRig(t, restoring("pvc-b", "node-b", snap), restoring("pvc-c", "node-c", snap),
		restoring("pvc-other", "node-b", "node-a/vg0/snap-2"), restoring("pvc-done", "node-b", snap))
	done := restoring("pvc-done", "node-b", snap)
	if err := rg.c.Get(ctx, client.ObjectKey{Name: "pvc-done"}, done); err != nil {
		t.Fatal(err)
	}
	done.Status.Phase = v1alpha1.PhaseReady
	if err := rg.c.Status().Update(ctx, done); err != nil {
		t.Fatal(err)
	}
	opened := &openedSources{}
	a := &TransferAuthorizer{Reader: rg.c, Node: "node-a", Sources: opened}

	if _, err := a.Authorize(ctx, "node-b", transfer.Request{Source: snap, For: "pvc-b"}); err != nil {
		t.Fatalf("node-b filling its volume from node-a's snapshot: %v", err)
	}
	if len(opened.ids) != 1 || opened.ids[0].String() != snap {
		t.Fatalf("opened %v, want %s", opened.ids, snap)
	}
	for name, c := range map[string]struct {
		peer string
		req  transfer.Request
		want string
	}{
		"another node's volume":           {"node-b", transfer.Request{Source: snap, For: "pvc-c"}, "no volume pvc-c"},
		"a volume of another source":      {"node-b", transfer.Request{Source: snap, For: "pvc-other"}, "no volume pvc-other"},
		"a volume that does not exist":    {"node-b", transfer.Request{Source: snap, For: "pvc-none"}, "no volume pvc-none"},
		"a volume already made":           {"node-b", transfer.Request{Source: snap, For: "pvc-done"}, "no longer being made"},
		"a snapshot of another node":      {"node-b", transfer.Request{Source: "node-z/vg0/snap-1", For: "pvc-b"}, "not a snapshot of node node-a"},
		"a peer that is not the volume's": {"node-c", transfer.Request{Source: snap, For: "pvc-b"}, "no volume pvc-b"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := a.Authorize(ctx, c.peer, c.req)
			if !errors.Is(err, transfer.ErrRefused) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a refusal saying %q", err, c.want)
			}
		})
	}
	if len(opened.ids) != 1 {
		t.Errorf("refused requests opened sources: %v", opened.ids)
	}
}
