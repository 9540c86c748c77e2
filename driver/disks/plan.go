package disks

import (
	"fmt"
	"slices"
	"strings"

	"carve.dev/carve/lvm"
)

// Plan is what a declaration asks of one volume group on one node, its
// disks sorted by path in each list.
type Plan struct {
	VG string
	// Create are the devices to vgcreate VG from: it does not exist yet.
	Create []string
	// Extend are the devices to vgextend VG with.
	Extend []string
	// Members are the selected devices already physical volumes of VG.
	Members []string
	// Refused are the selected devices Carve will not take, and why.
	Refused []Refusal
}

// Refusal is a selected device that is not blank, and why, for the
// node's status: a person reads it and decides.
type Refusal struct {
	Device, Reason string
}

// wipeAdvice ends the reason of a device holding data of an unknown owner.
const wipeAdvice = "wipe it with wipefs -a if its data is not needed"

// PlanFor decides what becomes of each disk the entry selects (Match),
// given what blkid found on each (sigs, by Disk.Path; see Probe) and the
// physical volumes lvm2 lists (pvs). Carve takes only blank disks: every
// rule below refuses rather than guesses, because taking a disk writes an
// LVM label over whatever it held, and whether that mattered is not
// something Carve can know. A refusal costs a person a wipefs; a wrong
// take costs the data.
func PlanFor(d VGDecl, disks []Disk, sigs map[string]Signatures, pvs []lvm.PV) Plan {
	return planVG(d, disks, sigs, pvs, nil)
}

// PlanNode plans every entry that applies to one node (ForNode). A disk
// two entries select is refused by both unless it is already a PV: which
// group should have it is for the declaration to say, not the order the
// plans run in.
func PlanNode(decls []VGDecl, disks []Disk, sigs map[string]Signatures, pvs []lvm.PV) []Plan {
	selectedBy := map[string][]string{}
	for _, d := range decls {
		for _, disk := range Match(d, disks) {
			selectedBy[disk.Path] = append(selectedBy[disk.Path], d.VG)
		}
	}
	plans := make([]Plan, 0, len(decls))
	for _, d := range decls {
		plans = append(plans, planVG(d, disks, sigs, pvs, selectedBy))
	}
	return plans
}

func planVG(d VGDecl, disks []Disk, sigs map[string]Signatures, pvs []lvm.PV, selectedBy map[string][]string) Plan {
	p := Plan{VG: d.VG}
	exists := slices.ContainsFunc(pvs, func(pv lvm.PV) bool { return pv.VGName == d.VG })
	for _, disk := range Match(d, disks) {
		if pv, ok := pvOf(disk, pvs); ok && pv.VGName == d.VG {
			p.Members = append(p.Members, disk.Path)
			continue
		}
		reason := refusal(disk, sigs, pvs)
		if vgs := selectedBy[disk.Path]; reason == "" && len(vgs) > 1 {
			reason = fmt.Sprintf("is selected by the declarations of volume groups %s: make them select disjoint disks", strings.Join(vgs, " and "))
		}
		switch {
		case reason != "":
			p.Refused = append(p.Refused, Refusal{Device: disk.Path, Reason: reason})
		case exists:
			p.Extend = append(p.Extend, disk.Path)
		default:
			p.Create = append(p.Create, disk.Path)
		}
	}
	return p
}

// pvOf finds the disk among lvm2's PVs, by its path or one of its links:
// lvm2 names a PV by the path it scanned (/dev/sdb, or a multipath
// device's /dev/mapper name).
func pvOf(disk Disk, pvs []lvm.PV) (lvm.PV, bool) {
	i := slices.IndexFunc(pvs, func(pv lvm.PV) bool {
		return pv.Name == disk.Path || slices.Contains(disk.Links, pv.Name)
	})
	if i < 0 {
		return lvm.PV{}, false
	}
	return pvs[i], true
}

// refusal is why Carve will not take the disk, "" when it is blank and
// free.
func refusal(disk Disk, sigs map[string]Signatures, pvs []lvm.PV) string {
	if pv, ok := pvOf(disk, pvs); ok {
		if pv.VGName != "" {
			return fmt.Sprintf("is a physical volume of volume group %s: Carve takes only blank disks", pv.VGName)
		}
		// An orphan PV is refused too. lvm2 shows a PV of a VG as one of
		// no VG when the VG's metadata is on other PVs not attached here
		// (pvcreate --metadatacopies 0), and an administrator may have
		// made it for a group yet to be created: it is not known to be
		// free, only to be labelled.
		return "is a physical volume of no volume group: pvremove it to let Carve take it"
	}
	switch {
	case disk.ReadOnly:
		return "is read-only: make it writable (a write-protect switch, blockdev --setrw) to let Carve take it"
	case disk.Size == 0:
		return "has no space (size 0): is there a medium in it?"
	case len(disk.Partitions) > 0:
		// The kernel's partitions, whatever blkid reads now: a table
		// rewritten since it was read still has its partitions in use.
		return fmt.Sprintf("has partitions %s: Carve takes only whole blank disks; %s", strings.Join(disk.Partitions, ", "), wipeAdvice)
	case len(disk.Holders) > 0:
		// A holder is a device the kernel has built on this one right
		// now (device-mapper, md, bcache): a label written under it
		// corrupts it live.
		return fmt.Sprintf("is in use by %s: a device is built on it; stop that device first", strings.Join(disk.Holders, ", "))
	}
	s, ok := sigs[disk.Path]
	if !ok {
		return "not probed: what it holds is unknown (blkid -p did not answer for it)"
	}
	return signatureRefusal(s)
}

// signatureRefusal says what blkid found, "" for nothing. Any signature
// refuses: what blkid names is data of someone's (a filesystem, a
// swap area another boot uses, a LUKS header whose loss loses every key,
// an md member of an array not assembled here), and an LVM2_member that
// lvm2 does not list is a PV its filter or devices file hides, or another
// host's: hidden, not free.
func signatureRefusal(s Signatures) string {
	var what []string
	if s.Ambivalent {
		what = append(what, "several signatures blkid -p cannot tell apart")
	}
	if s.PTType != "" {
		what = append(what, fmt.Sprintf("a %s partition table", s.PTType))
	}
	switch {
	case s.Type == "LVM2_member":
		return "holds a LVM2_member signature that lvm2 here does not list (hidden by its filter or devices file, or another host's): " +
			"if no volume group needs it, pvremove it, or " + wipeAdvice
	case s.Type == "linux_raid_member":
		return "holds a linux_raid_member signature (an md array's disk): if no array needs it, mdadm --zero-superblock it, or " + wipeAdvice
	case s.Type != "" && s.Usage == "filesystem":
		what = append(what, fmt.Sprintf("a %s filesystem", s.Type))
	case s.Type != "":
		what = append(what, fmt.Sprintf("a %s signature", s.Type))
	}
	if len(what) == 0 {
		if s.Blank() {
			return ""
		}
		what = append(what, "a signature blkid did not name")
	}
	return "holds " + strings.Join(what, " and ") + labelText(s) + ": " + wipeAdvice
}

// labelText names the signature's label or UUID, for a person to tell
// which data it is.
func labelText(s Signatures) string {
	switch {
	case s.Label != "":
		return fmt.Sprintf(" (label %q)", s.Label)
	case s.UUID != "":
		return " (UUID " + s.UUID + ")"
	}
	return ""
}
