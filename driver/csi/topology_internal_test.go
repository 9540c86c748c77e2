package csi

import (
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"carve.dev/carve/driver/volume"
)

// TestChooseNodes: every node the requirements name, preferred first and
// then requisite in their order, each once, segments of other keys
// skipped; a segment of Carve's key that is no node ID, wherever it is,
// is INVALID_ARGUMENT.
func TestChooseNodes(t *testing.T) {
	topo := func(nodes ...string) []*csi.Topology {
		var ts []*csi.Topology
		for _, n := range nodes {
			ts = append(ts, nodeTopology(n))
		}
		return ts
	}
	other := &csi.Topology{Segments: map[string]string{"zone": "z1"}}
	got, err := chooseNodes(&csi.TopologyRequirement{Preferred: topo("node-b", "node-a"),
		Requisite: append(topo("node-a", "node-c", "node-b"), other)})
	if want := []string{"node-b", "node-a", "node-c"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	if got, err := chooseNodes(nil); err != nil || got != nil {
		t.Errorf("no requirements: %v, %v", got, err)
	}
	_, err = chooseNodes(&csi.TopologyRequirement{Preferred: topo("node-a"), Requisite: topo("node-a", "bad/node")})
	if volume.CodeOf(err) != codes.InvalidArgument {
		t.Errorf("a requisite node with a slash: %v, want INVALID_ARGUMENT", err)
	}
}
