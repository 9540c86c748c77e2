// Package disks tells which block devices a declaration gives to which
// volume group, and whether each is safe to take.
//
// An administrator declares, per node, the disks that make each volume
// group (Declaration): by path (globs over /dev), by size and by model.
// Scan lists a node's disks from sysfs, Match picks those a declaration
// selects, Probe asks blkid what each holds, and PlanFor decides: the
// disks to create the volume group from or extend it with, the ones
// already in it, and the ones refused, each with a reason written for a
// person. Carve takes only blank disks: anything holding a signature, a
// partition, a holder or another volume group's label is refused, never
// wiped. The package decides only; it changes nothing.
package disks
