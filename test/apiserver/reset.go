package apiserver

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
)

// Reset deletes every Carve resource, finalizers and all, and waits until
// they are gone: the next test starts from an empty API.
func Reset(ctx context.Context, c client.Client) error {
	lists := []client.ObjectList{&v1alpha1.LogicalVolumeList{}, &v1alpha1.LogicalVolumeSnapshotList{},
		&v1alpha1.LogicalVolumeGroupSnapshotList{}, &v1alpha1.NodeStorageList{}, &v1alpha1.VolumeMoveList{}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		left := 0
		for _, l := range lists {
			n, err := clear(ctx, c, l)
			if err != nil {
				return err
			}
			left += n
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d resources still there after 30 s", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clear strips the finalizers of every object of l's kind and deletes it;
// it returns how many were there.
func clear(ctx context.Context, c client.Client, l client.ObjectList) (int, error) {
	if err := c.List(ctx, l); err != nil {
		return 0, fmt.Errorf("list: %w", err)
	}
	items, err := meta.ExtractList(l)
	if err != nil {
		return 0, err
	}
	objs := make([]client.Object, 0, len(items))
	for _, it := range items {
		objs = append(objs, it.(client.Object))
	}
	for _, o := range objs {
		if len(o.GetFinalizers()) > 0 {
			o.SetFinalizers(nil)
			if err := c.Update(ctx, o); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return 0, fmt.Errorf("drop finalizers of %s: %w", o.GetName(), err)
			}
		}
		if err := c.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("delete %s: %w", o.GetName(), err)
		}
	}
	return len(objs), nil
}
