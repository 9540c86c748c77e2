package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/disks"
	"carve.dev/carve/driver/volume"
)

// ReasonDiskRefused: a disk the declaration selects that the agent will
// not take (on the NodeStorage, one event per disk).
const ReasonDiskRefused = "DiskRefused"

// DiskKeeper runs the disk setup now and then (a controller-runtime
// Runnable): it reads the declaration afresh each time, so that an edit
// of its ConfigMap, or a disk plugged in, takes effect at the next pass
// with no restart, and writes what it refuses into the node's
// NodeStorage.
type DiskKeeper struct {
	Setup *DiskSetup
	// Declaration is the declaration's file (a ConfigMap's key, mounted).
	// None there: nothing is declared for any node.
	Declaration string
	// Nodes reads the node's labels, which the declaration's node
	// selectors match (an uncached reader: the agent's cache holds no
	// Node).
	Nodes client.Reader
	// Storage writes the refusals, and the VGs as they are after a pass.
	Storage *StorageReporter
	// Interval between passes; 0 means a minute.
	Interval time.Duration
}

// Start passes now and then every Interval until ctx ends. A failed pass
// is logged and the next one tries again.
func (k *DiskKeeper) Start(ctx context.Context) error {
	repeat(ctx, cmp.Or(k.Interval, time.Minute), k.Pass, func(err error) {
		klog.ErrorS(err, "Disk setup pass failed; the next one tries again", "node", k.Setup.Node, "declaration", k.Declaration)
	})
	return nil
}

// Pass reads the declaration and the node's labels, carries the
// declaration out (DiskSetup.Apply) and reports its refusals. An invalid
// declaration changes nothing, not even the refusals last reported.
func (k *DiskKeeper) Pass(ctx context.Context) error {
	decl, err := readDeclaration(k.Declaration)
	if err != nil {
		return err
	}
	var node corev1.Node
	// Nothing declared (most clusters): no need to read the Node, each
	// minute on every node.
	if len(decl.VolumeGroups) > 0 {
		if err := k.Nodes.Get(ctx, types.NamespacedName{Name: k.Setup.Node}, &node); err != nil {
			return fmt.Errorf("read node %s for its labels: %w", k.Setup.Node, err)
		}
	}
	plans, applyErr := k.Setup.Apply(ctx, decl, node.Labels)
	if errors.Is(applyErr, disks.ErrInvalid) {
		return applyErr
	}
	return errors.Join(applyErr, k.Storage.SetDiskRefusals(ctx, refusalsOf(plans)))
}

// readDeclaration reads and parses the declaration's file; none there is
// an empty declaration.
func readDeclaration(path string) (disks.Declaration, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return disks.Declaration{}, nil
	}
	if err != nil {
		return disks.Declaration{}, fmt.Errorf("read the disk declaration: %w", err)
	}
	d, err := disks.Parse(data)
	if err != nil {
		return disks.Declaration{}, fmt.Errorf("the disk declaration %s: %w", path, err)
	}
	return d, nil
}

// refusalsOf lists the plans' refusals, in the plans' order.
func refusalsOf(plans []disks.Plan) []v1alpha1.DiskRefusal {
	var out []v1alpha1.DiskRefusal
	for _, p := range plans {
		for _, r := range p.Refused {
			out = append(out, v1alpha1.DiskRefusal{VolumeGroup: p.VG, Device: r.Device, Reason: r.Reason})
		}
	}
	return out
}

// SetDiskRefusals writes the disk setup's refusals into the node's
// NodeStorage, with its VGs as they are now (so that a VG just made or
// grown shows at once), the rest of its status as the last report left
// it; and it records a Warning event for each refusal the status did not
// hold yet, so that each is told once.
func (s *StorageReporter) SetDiskRefusals(ctx context.Context, refusals []v1alpha1.DiskRefusal) error {
	return s.withSpace(ctx, func(space []volume.VGSpace) error {
		ns, was, err := s.rewrite(ctx, space, func(next *v1alpha1.NodeStorageStatus) { next.DiskRefusals = refusals })
		if err != nil {
			return err
		}
		for _, r := range refusals {
			if slices.Contains(was.DiskRefusals, r) {
				continue
			}
			klog.InfoS("A declared disk is refused", "node", s.Node, "volumeGroup", r.VolumeGroup, "device", r.Device, "reason", r.Reason)
			emitAbout(s.Events, &ns, s.statusReference(&ns, fmt.Sprintf("status.diskRefusals{%s}", r.Device)), "Warning",
				ReasonDiskRefused, "Disks", "%s, declared for volume group %s, %s", r.Device, r.VolumeGroup, r.Reason)
		}
		return nil
	})
}
