package backend

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
)

// holdAttempts bounds how often an attach reads, checks and patches again
// when a move's hold changed between its check and its patch. The hold is
// written once per move and taken away once, so a second attempt sees it
// settled; the bound only keeps a broken API server from spinning us.
const holdAttempts = 5

// recordPublished writes node into the volume's spec.publishedNode, on
// the condition that the move's hold (v1alpha1.AnnotationMovedBy) is what
// notHeld checked.
//
// Why a condition: a move writes its hold, then looks whether the volume
// is published. An attach that read the volume before the hold and
// patched it after would record publishedNode past both, and a pod could
// start on a volume whose last snapshot the move had taken. The JSON
// patch's test operation makes the API server refuse that patch (422):
// the attach reads again and sees the hold. So every publishedNode the
// move's look can miss was recorded before its hold, where it sees it.
//
// Why the hold alone, not the resource version (an optimistic lock):
// the agent's status updates move the version all the time, and an
// attach must not lose its patch to them; the hold is all the check
// reads. An attach that already has node patches nothing (a retry).
func (b *Backend) recordPublished(ctx context.Context, id volume.ID, node string) (*v1alpha1.LogicalVolume, error) {
	for attempt := 1; ; attempt++ {
		lv, err := b.lookup(ctx, id)
		if err != nil {
			return nil, err
		}
		if err := notHeld(lv, node); err != nil {
			return nil, err
		}
		if lv.Spec.PublishedNode == node {
			return lv, nil
		}
		patch, err := publishPatch(lv, node)
		if err != nil {
			return nil, err
		}
		// The patch returns the resource with the generation it made.
		err = b.Client.Patch(ctx, lv, client.RawPatch(types.JSONPatchType, patch))
		if err == nil {
			return lv, nil
		}
		if !apierrors.IsInvalid(err) || attempt == holdAttempts {
			return nil, fmt.Errorf("update %s: %w", lv.Name, err)
		}
		klog.V(2).InfoS("The volume's hold changed between the attach's check and its patch; checking again",
			"volume", id, "node", node, "attempt", attempt, "err", err)
	}
}

// jsonPatchOp is one operation of a JSON patch (RFC 6902).
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// publishPatch sets spec.publishedNode to node, after a test that the
// hold is as lv has it. A test of null passes where the key is missing;
// where lv has no annotations at all, the map itself is tested, since a
// path through a missing map fails the test whatever its value.
func publishPatch(lv *v1alpha1.LogicalVolume, node string) ([]byte, error) {
	test := jsonPatchOp{Op: "test", Path: "/metadata/annotations"}
	if lv.Annotations != nil {
		test.Path += "/" + jsonPointerEscape(v1alpha1.AnnotationMovedBy)
		if move, ok := lv.Annotations[v1alpha1.AnnotationMovedBy]; ok {
			test.Value = move
		}
	}
	set := jsonPatchOp{Op: "add", Path: "/spec/publishedNode", Value: node}
	patch, err := json.Marshal([]jsonPatchOp{test, set})
	if err != nil {
		return nil, fmt.Errorf("patch of %s: %w", lv.Name, err)
	}
	return patch, nil
}

// jsonPointerEscape escapes a key for a JSON pointer (RFC 6901).
func jsonPointerEscape(key string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}

// notHeld, as PublishVolume's check, refuses a volume a move holds
// (v1alpha1.AnnotationMovedBy) unless it is published to node already
// (a retry of the attach of the pod that still runs, which changes
// nothing): a pod started on it now would write it after the move's
// second snapshot, and those writes would be lost. It reads the resource
// afresh (recordPublished's lookup), so a hold written before is seen;
// one written after the read makes the patch fail its test.
func notHeld(lv *v1alpha1.LogicalVolume, node string) error {
	move := lv.Annotations[v1alpha1.AnnotationMovedBy]
	if move == "" || lv.Spec.PublishedNode == node {
		return nil
	}
	return fmt.Errorf("%w: volume %s is being moved to another node (VolumeMove %s): no pod may start with it until the move is done",
		volume.ErrFailedPrecondition, lv.Name, move)
}
