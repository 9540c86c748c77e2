package v1alpha1

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestSchemeKnowsTheKinds(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"LogicalVolume", "LogicalVolumeSnapshot", "LogicalVolumeGroupSnapshot", "NodeStorage", "VolumeMove"} {
		if !s.Recognizes(GroupVersion.WithKind(kind)) || !s.Recognizes(GroupVersion.WithKind(kind+"List")) {
			t.Errorf("scheme does not know %s", kind)
		}
	}
}

// TestDeepCopyAndJSON: a copy shares nothing with its original, and JSON
// keeps every field the agent and the controller exchange.
func TestDeepCopyAndJSON(t *testing.T) {
	lv := &LogicalVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-1"},
		Spec: LogicalVolumeSpec{Name: "pvc-1", NodeName: "n1", VolumeGroup: "vg0", RequiredBytes: 1 << 30,
			Type: VolumeType{Mirrors: 1}, Source: &ContentSource{Kind: "snapshot", ID: "n1/vg0/snap-x"},
			ParamsDigest: "abc", PublishedNode: "n1"},
		Status: LogicalVolumeStatus{Phase: PhaseReady, SizeBytes: 1 << 30,
			Health: []HealthProblem{{Kind: "Degraded", Reason: "RAIDSyncing"}}, Error: &OperationError{Code: "NoSpace"}},
	}
	cp := lv.DeepCopy()
	cp.Spec.Source.ID = "changed"
	cp.Status.Health[0].Reason = "changed"
	if lv.Spec.Source.ID == "changed" || lv.Status.Health[0].Reason == "changed" {
		t.Fatal("DeepCopy shares pointers or slices with the original")
	}
	b, err := json.Marshal(lv)
	if err != nil {
		t.Fatal(err)
	}
	var back LogicalVolume
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Spec.Source.ID != lv.Spec.Source.ID || back.Spec.Type.Mirrors != 1 || back.Status.Error.Code != "NoSpace" ||
		back.Spec.PublishedNode != "n1" {
		t.Errorf("JSON round trip lost fields: %s", b)
	}
}

// TestCRDsAreGenerated: deploy/crds holds a CRD per kind, cluster-scoped,
// with a status subresource (make generate writes them).
func TestCRDsAreGenerated(t *testing.T) {
	for _, plural := range []string{"logicalvolumes", "logicalvolumesnapshots", "nodestorages"} {
		b, err := os.ReadFile("../../../deploy/crds/lvm.carve.dev_" + plural + ".yaml")
		if err != nil {
			t.Fatalf("CRD of %s: %v (run make generate)", plural, err)
		}
		for _, want := range []string{"scope: Cluster", "status: {}", "plural: " + plural, "name: v1alpha1"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("CRD of %s lacks %q", plural, want)
			}
		}
	}
}
