package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/disks"
	"carve.dev/carve/lvm"
)

// DiskLVM is what the disk setup needs of lvm2: the PVs it lists, and a
// volume group made of, or grown by, devices it finds blank (lvm.Client).
type DiskLVM interface {
	ListPVs(ctx context.Context) ([]lvm.PV, error)
	CreateVGOnBlank(ctx context.Context, vg string, devices ...string) error
	ExtendVGOnBlank(ctx context.Context, vg string, devices ...string) error
}

// DiskSetup makes and grows the node's volume groups out of the disks an
// administrator's declaration gives them. driver/disks decides (which
// disks, and which to refuse); DiskSetup reads the node for it and
// carries out the plan.
//
// Crash safety: each volume group is made or grown by one lvm2 command,
// which writes its metadata last. A command cut short leaves at worst its
// disks labelled as PVs of no VG, which the next pass refuses ("a
// physical volume of no volume group") for a person to look at: a disk
// is never taken twice, nor wiped. Between the probe and the command a
// disk may gain data; lvm2 then finds its signature and, asked whether
// to wipe it, answers no (lvm.Client.CreateVGOnBlank): the command fails,
// the disk keeps its data, and the next pass refuses it.
type DiskSetup struct {
	Node string
	// Served are the VGs the node serves (--volume-groups): a declared VG
	// that is not one of them is not made, since Carve would never carve
	// from it. Nil: any.
	Served []string
	LVM    DiskLVM
	// Scan lists the node's disks (disks.Scan of /sys/block and /dev).
	Scan func() ([]disks.Disk, error)
	// Probe tells what a device holds (disks.Probe with the node's
	// runner).
	Probe func(ctx context.Context, dev string) (disks.Signatures, error)
}

// Apply carries out decl on the node, whose labels select its entries:
// it returns the plan of each volume group that applies (the disks taken,
// the members, the refusals and their reasons) and the failures of the
// lvm2 commands, each volume group's apart. An entry that fails does not
// stop the others.
func (s *DiskSetup) Apply(ctx context.Context, decl disks.Declaration, labels map[string]string) ([]disks.Plan, error) {
	decls, err := decl.ForNode(s.Node, labels)
	if err != nil {
		return nil, err
	}
	var errs []error
	decls = slices.DeleteFunc(decls, func(d disks.VGDecl) bool {
		if s.Served == nil || slices.Contains(s.Served, d.VG) {
			return false
		}
		errs = append(errs, fmt.Errorf("volume group %s is declared for node %s, which does not serve it (--volume-groups %v): its disks are not taken",
			d.VG, s.Node, s.Served))
		return true
	})
	if len(decls) == 0 {
		return nil, errors.Join(errs...)
	}
	all, err := s.Scan()
	if err != nil {
		return nil, fmt.Errorf("scan the node's disks: %w", err)
	}
	pvs, err := s.LVM.ListPVs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list physical volumes: %w", err)
	}
	plans := disks.PlanNode(decls, all, s.probeSelected(ctx, decls, all), pvs)
	for _, p := range plans {
		errs = append(errs, s.take(ctx, p))
	}
	return plans, errors.Join(errs...)
}

// probeSelected probes each disk an entry selects, once. A disk that
// cannot be probed is left out: the plan refuses it as unknown.
func (s *DiskSetup) probeSelected(ctx context.Context, decls []disks.VGDecl, all []disks.Disk) map[string]disks.Signatures {
	sigs := map[string]disks.Signatures{}
	for _, d := range decls {
		for _, disk := range disks.Match(d, all) {
			if _, done := sigs[disk.Path]; done {
				continue
			}
			sig, err := s.Probe(ctx, disk.Path)
			if err != nil {
				klog.ErrorS(err, "A declared disk cannot be probed; it is not taken", "device", disk.Path, "volumeGroup", d.VG)
				continue
			}
			sigs[disk.Path] = sig
		}
	}
	return sigs
}

// take runs the plan's one command, if any: a plan creates its volume
// group or extends it, never both (disks.Plan).
func (s *DiskSetup) take(ctx context.Context, p disks.Plan) error {
	switch {
	case len(p.Create) > 0:
		if err := s.LVM.CreateVGOnBlank(ctx, p.VG, p.Create...); err != nil {
			return fmt.Errorf("volume group %s from declared disks %v: %w", p.VG, p.Create, err)
		}
		klog.InfoS("Created a volume group from declared disks", "volumeGroup", p.VG, "devices", p.Create)
	case len(p.Extend) > 0:
		if err := s.LVM.ExtendVGOnBlank(ctx, p.VG, p.Extend...); err != nil {
			return fmt.Errorf("extend volume group %s with declared disks %v: %w", p.VG, p.Extend, err)
		}
		klog.InfoS("Extended a volume group with declared disks", "volumeGroup", p.VG, "devices", p.Extend)
	}
	return nil
}
