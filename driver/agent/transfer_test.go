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
type openedSources struct{ ids, bases []volume.ID }

func (o *openedSources) TransferSource(_ context.Context, id, base volume.ID) (transfer.Source, error) {
	o.ids = append(o.ids, id)
	o.bases = append(o.bases, base)
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
	wantRefusals(t, a, opened, map[string]refusal{
		"another node's volume":           {"node-b", transfer.Request{Source: snap, For: "pvc-c"}, "no volume pvc-c"},
		"a volume of another source":      {"node-b", transfer.Request{Source: snap, For: "pvc-other"}, "no volume pvc-other"},
		"a volume that does not exist":    {"node-b", transfer.Request{Source: snap, For: "pvc-none"}, "no volume pvc-none"},
		"a volume already made":           {"node-b", transfer.Request{Source: snap, For: "pvc-done"}, "no longer being made"},
		"a snapshot of another node":      {"node-b", transfer.Request{Source: "node-z/vg0/snap-1", For: "pvc-b"}, "not a snapshot of node node-a"},
		"a peer that is not the volume's": {"node-c", transfer.Request{Source: snap, For: "pvc-b"}, "no volume pvc-b"},
	})
}

// TestTransferAuthorizerCatchUp: node-a lets node-b catch up from
// snapshot S1 to S2 only for a ready LogicalVolume on node-b made from
// S1, whose spec.catchUpTo names S2, not caught up yet and published
// nowhere; a full transfer of S2 for it is refused (it is made), and so
// is every other catch-up, alike.
func TestTransferAuthorizerCatchUp(t *testing.T) {
	const s1, s2 = "node-a/vg0/snap-1", "node-a/vg0/snap-2"
	moving := func(name, on, from, to string, edit func(*v1alpha1.LogicalVolume)) *v1alpha1.LogicalVolume {
		lv := &v1alpha1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.LogicalVolumeSpec{Name: name, NodeName: on, VolumeGroup: "vg0", RequiredBytes: mib, ParamsDigest: "d",
				Source: &v1alpha1.ContentSource{Kind: "snapshot", ID: from}, CatchUpTo: to}}
		if edit != nil {
			edit(lv)
		}
		return lv
	}
	objs := []client.Object{
		moving("pvc-move", "node-b", s1, s2, nil),
		moving("pvc-unasked", "node-b", s1, "", nil),
		moving("pvc-made", "node-b", "node-a/vg0/snap-0", s2, nil),
		moving("pvc-published", "node-b", s1, s2, func(lv *v1alpha1.LogicalVolume) { lv.Spec.PublishedNode = "node-b" }),
		moving("pvc-caught", "node-b", s1, s2, nil),
		moving("pvc-making", "node-b", s1, s2, nil),
	}
	rg := newRig(t, objs...)
	for _, name := range []string{"pvc-move", "pvc-unasked", "pvc-made", "pvc-published", "pvc-caught"} {
		lv := &v1alpha1.LogicalVolume{}
		if err := rg.c.Get(ctx, client.ObjectKey{Name: name}, lv); err != nil {
			t.Fatal(err)
		}
		lv.Status.Phase = v1alpha1.PhaseReady
		if name == "pvc-caught" {
			lv.Status.CaughtUpTo = s2
		}
		if err := rg.c.Status().Update(ctx, lv); err != nil {
			t.Fatal(err)
		}
	}
	opened := &openedSources{}
	a := &TransferAuthorizer{Reader: rg.c, Node: "node-a", Sources: opened}

	if _, err := a.Authorize(ctx, "node-b", transfer.Request{Source: s2, Base: s1, For: "pvc-move"}); err != nil {
		t.Fatalf("node-b catching up its moved volume: %v", err)
	}
	if len(opened.ids) != 1 || opened.ids[0].String() != s2 || opened.bases[0].String() != s1 {
		t.Fatalf("opened %v against %v, want %s against %s", opened.ids, opened.bases, s2, s1)
	}
	wantRefusals(t, a, opened, map[string]refusal{
		"a catch-up the controller did not ask for": {"node-b", transfer.Request{Source: s2, Base: s1, For: "pvc-unasked"}, "no volume pvc-unasked"},
		"a base that is not the volume's source":    {"node-b", transfer.Request{Source: s2, Base: s1, For: "pvc-made"}, "no volume pvc-made"},
		"another snapshot than the one asked for":   {"node-b", transfer.Request{Source: "node-a/vg0/snap-3", Base: s1, For: "pvc-move"}, "no volume pvc-move"},
		"a volume published":                        {"node-b", transfer.Request{Source: s2, Base: s1, For: "pvc-published"}, "published to node-b"},
		"a volume caught up already":                {"node-b", transfer.Request{Source: s2, Base: s1, For: "pvc-caught"}, "not waiting"},
		"a volume not made yet":                     {"node-b", transfer.Request{Source: s2, Base: s1, For: "pvc-making"}, "not waiting"},
		"a peer that is not the volume's":           {"node-c", transfer.Request{Source: s2, Base: s1, For: "pvc-move"}, "no volume pvc-move"},
		"a base of another node":                    {"node-b", transfer.Request{Source: s2, Base: "node-z/vg0/snap-1", For: "pvc-move"}, "not snapshots of node node-a"},
		"the whole snapshot for a made volume":      {"node-b", transfer.Request{Source: s2, For: "pvc-move"}, "no volume pvc-move"},
	})
}

// refusal is a request of peer that the authorizer must refuse, saying want.
type refusal struct {
	peer string
	req  transfer.Request
	want string
}

// wantRefusals checks that a refuses each request alike, opening nothing
// more than the one source opened before.
func wantRefusals(t *testing.T, a *TransferAuthorizer, opened *openedSources, cases map[string]refusal) {
	t.Helper()
	for name, c := range cases {
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
