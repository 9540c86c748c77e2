package disks

import (
	"reflect"
	"strings"
	"testing"

	"carve.dev/carve/lvm"
)

// planDisks: one disk per rule, all selected by planDecl.
var planDisks = []Disk{
	{Name: "sdb", Path: "/dev/sdb", Size: 100 * gib},
	{Name: "sdc", Path: "/dev/sdc", Size: 100 * gib},
	{Name: "sdd", Path: "/dev/sdd", Size: 100 * gib, Holders: []string{"dm-0"}},
	{Name: "sde", Path: "/dev/sde", Size: 100 * gib, Holders: []string{"dm-1"}},
	{Name: "sdf", Path: "/dev/sdf", Size: 100 * gib, Links: []string{"/dev/disk/by-id/wwn-f"}},
	{Name: "sdg", Path: "/dev/sdg", Size: 100 * gib, ReadOnly: true},
	{Name: "sdh", Path: "/dev/sdh", Size: 100 * gib, Partitions: []string{"sdh1", "sdh2"}},
	{Name: "sdi", Path: "/dev/sdi", Size: 100 * gib, Holders: []string{"dm-3", "md0"}},
	{Name: "sdj", Path: "/dev/sdj", Size: 100 * gib},
	{Name: "sdk", Path: "/dev/sdk"},
	{Name: "sdl", Path: "/dev/sdl", Size: 100 * gib},
}

var planDecl = VGDecl{VG: "data", Paths: []string{"/dev/sd*"}}

// blankSigs are the probe results of every disk: nothing found.
func blankSigs(disks []Disk) map[string]Signatures {
	s := map[string]Signatures{}
	for _, d := range disks {
		s[d.Path] = Signatures{}
	}
	return s
}

func reasonOf(p Plan, dev string) string {
	for _, r := range p.Refused {
		if r.Device == dev {
			return r.Reason
		}
	}
	return ""
}

func TestPlanRules(t *testing.T) {
	pvs := []lvm.PV{
		{Name: "/dev/sdd", VGName: "data"},
		{Name: "/dev/sde", VGName: "other"},
		{Name: "/dev/disk/by-id/wwn-f", VGName: ""},
	}
	sigs := blankSigs(planDisks)
	delete(sigs, "/dev/sdj")
	sigs["/dev/sdl"] = Signatures{Type: "xfs", Usage: "filesystem", UUID: "u-1"}
	p := PlanFor(planDecl, planDisks, sigs, pvs)

	if want := []string{"/dev/sdb", "/dev/sdc"}; !reflect.DeepEqual(p.Extend, want) || p.Create != nil {
		t.Errorf("extend %v create %v, want extend %v: the VG exists", p.Extend, p.Create, want)
	}
	if want := []string{"/dev/sdd"}; !reflect.DeepEqual(p.Members, want) {
		t.Errorf("members %v, want %v (its holder is its own LV)", p.Members, want)
	}
	want := []Refusal{
		{"/dev/sde", "is a physical volume of volume group other: Carve takes only blank disks"},
		{"/dev/sdf", "is a physical volume of no volume group: pvremove it to let Carve take it"},
		{"/dev/sdg", "is read-only: make it writable (a write-protect switch, blockdev --setrw) to let Carve take it"},
		{"/dev/sdh", "has partitions sdh1, sdh2: Carve takes only whole blank disks; wipe it with wipefs -a if its data is not needed"},
		{"/dev/sdi", "is in use by dm-3, md0: a device is built on it; stop that device first"},
		{"/dev/sdj", "not probed: what it holds is unknown (blkid -p did not answer for it)"},
		{"/dev/sdk", "has no space (size 0): is there a medium in it?"},
		{"/dev/sdl", "holds a xfs filesystem (UUID u-1): wipe it with wipefs -a if its data is not needed"},
	}
	if !reflect.DeepEqual(p.Refused, want) {
		t.Errorf("refused:\n%v\nwant\n%v", p.Refused, want)
	}
	if p.VG != "data" {
		t.Errorf("VG %q", p.VG)
	}
}

func TestPlanCreateWhenNoPVListsTheVG(t *testing.T) {
	disks := []Disk{planDisks[1], planDisks[0]}
	// A PV of another VG and an orphan elsewhere do not make data exist.
	pvs := []lvm.PV{{Name: "/dev/nvme0n1", VGName: "other"}, {Name: "/dev/sdz"}}
	p := PlanFor(planDecl, disks, blankSigs(disks), pvs)
	if want := []string{"/dev/sdb", "/dev/sdc"}; !reflect.DeepEqual(p.Create, want) || p.Extend != nil || p.Refused != nil || p.Members != nil {
		t.Fatalf("got %+v, want create %v", p, want)
	}
	// A VG whose every PV is missing still exists: extend it.
	p = PlanFor(planDecl, disks, blankSigs(disks), []lvm.PV{{Name: "[unknown]", VGName: "data", Missing: true}})
	if want := []string{"/dev/sdb", "/dev/sdc"}; !reflect.DeepEqual(p.Extend, want) || p.Create != nil {
		t.Fatalf("got %+v, want extend %v", p, want)
	}
}

func TestPlanOnlySelectedDisks(t *testing.T) {
	p := PlanFor(VGDecl{VG: "data", Paths: []string{"/dev/sdc"}}, planDisks, nil, nil)
	want := Plan{VG: "data", Refused: []Refusal{{"/dev/sdc", "not probed: what it holds is unknown (blkid -p did not answer for it)"}}}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("got %+v, want %+v", p, want)
	}
}

func TestPlanSignatures(t *testing.T) {
	for _, tc := range []struct {
		sig  Signatures
		want string
	}{
		{Signatures{Type: "xfs", Usage: "filesystem"}, "holds a xfs filesystem: " + wipeAdvice},
		{Signatures{Type: "ext4", Usage: "filesystem", Label: "backup"}, `holds a ext4 filesystem (label "backup"): ` + wipeAdvice},
		{Signatures{PTType: "gpt"}, "holds a gpt partition table: " + wipeAdvice},
		{Signatures{PTType: "dos", Type: "iso9660", Usage: "filesystem"}, "holds a dos partition table and a iso9660 filesystem: " + wipeAdvice},
		{Signatures{Type: "LVM2_member", Usage: "raid"}, "holds a LVM2_member signature that lvm2 here does not list"},
		{Signatures{Type: "LVM2_member"}, "pvremove it, or " + wipeAdvice},
		{Signatures{Type: "linux_raid_member", Usage: "raid"}, "holds a linux_raid_member signature (an md array's disk): if no array needs it, mdadm --zero-superblock it"},
		{Signatures{Type: "crypto_LUKS", Usage: "crypto"}, "holds a crypto_LUKS signature: " + wipeAdvice},
		{Signatures{Type: "swap", Usage: "other"}, "holds a swap signature: " + wipeAdvice},
		{Signatures{Ambivalent: true}, "holds several signatures blkid -p cannot tell apart: " + wipeAdvice},
		{Signatures{UUID: "x"}, "holds a signature blkid did not name (UUID x): " + wipeAdvice},
	} {
		disk := Disk{Name: "sdb", Path: "/dev/sdb", Size: gib}
		p := PlanFor(planDecl, []Disk{disk}, map[string]Signatures{disk.Path: tc.sig}, nil)
		if p.Create != nil || len(p.Refused) != 1 || !strings.Contains(p.Refused[0].Reason, tc.want) {
			t.Errorf("%+v: got %+v, want a refusal saying %q", tc.sig, p, tc.want)
		}
	}
}

func TestPlanNode(t *testing.T) {
	disks := []Disk{
		{Name: "sdb", Path: "/dev/sdb", Size: 100 * gib, Model: "A"},
		{Name: "sdc", Path: "/dev/sdc", Size: 500 * gib, Model: "A"},
		{Name: "sdd", Path: "/dev/sdd", Size: 500 * gib, Model: "B"},
		{Name: "sde", Path: "/dev/sde", Size: 500 * gib, Model: "A"},
	}
	decls := []VGDecl{{VG: "fast", Model: "A"}, {VG: "big", MinSize: "200Gi"}}
	pvs := []lvm.PV{{Name: "/dev/sde", VGName: "big"}}
	plans := PlanNode(decls, disks, blankSigs(disks), pvs)
	contested := "is selected by the declarations of volume groups fast and big: make them select disjoint disks"
	want := []Plan{
		{VG: "fast", Create: []string{"/dev/sdb"}, Refused: []Refusal{
			{"/dev/sdc", contested},
			{"/dev/sde", "is a physical volume of volume group big: Carve takes only blank disks"},
		}},
		{VG: "big", Extend: []string{"/dev/sdd"}, Members: []string{"/dev/sde"}, Refused: []Refusal{{"/dev/sdc", contested}}},
	}
	if !reflect.DeepEqual(plans, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", plans, want)
	}
	// Alone, each would take the contested disk.
	if p := PlanFor(decls[0], disks, blankSigs(disks), pvs); reasonOf(p, "/dev/sdc") != "" {
		t.Fatalf("PlanFor refused /dev/sdc: %+v", p)
	}
}
