package agent

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"carve.dev/carve/driver/disks"
	"carve.dev/carve/lvm"
)

// diskLVM records the disk setup's lvm2 commands; fail makes those of a
// volume group fail.
type diskLVM struct {
	pvs   []lvm.PV
	calls []string
	fail  string
}

func (f *diskLVM) ListPVs(context.Context) ([]lvm.PV, error) { return f.pvs, nil }

func (f *diskLVM) CreateVGOnBlank(_ context.Context, vg string, devices ...string) error {
	return f.record("vgcreate", vg, devices)
}

func (f *diskLVM) ExtendVGOnBlank(_ context.Context, vg string, devices ...string) error {
	return f.record("vgextend", vg, devices)
}

func (f *diskLVM) record(cmd, vg string, devices []string) error {
	f.calls = append(f.calls, cmd+" "+vg+" "+strings.Join(devices, " "))
	if vg == f.fail {
		return errors.New("lvm2 refused")
	}
	return nil
}

// took checks the commands run since the last check, and forgets them.
func (f *diskLVM) took(t *testing.T, want ...string) {
	t.Helper()
	if !slices.Equal(f.calls, want) {
		t.Errorf("commands %q, want %q", f.calls, want)
	}
	f.calls = nil
}

// diskNode is a node's disks and what each holds (absent: the probe
// fails), and how often each was probed.
type diskNode struct {
	disks  []disks.Disk
	sigs   map[string]disks.Signatures
	probed map[string]int
}

func (n *diskNode) setup(l *diskLVM) *DiskSetup {
	n.probed = map[string]int{}
	return &DiskSetup{Node: "node-a", LVM: l,
		Scan: func() ([]disks.Disk, error) { return n.disks, nil },
		Probe: func(_ context.Context, dev string) (disks.Signatures, error) {
			n.probed[dev]++
			s, ok := n.sigs[dev]
			if !ok {
				return disks.Signatures{}, errors.New("blkid " + dev + ": no answer")
			}
			return s, nil
		}}
}

func disk(name string, size uint64) disks.Disk {
	return disks.Disk{Name: name, Path: "/dev/" + name, Size: size}
}

func declare(t *testing.T, yaml string) disks.Declaration {
	t.Helper()
	d, err := disks.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Blank disks make a new VG with one vgcreate and grow an existing one
// with one vgextend; disks holding data, and disks no probe answered
// for, are refused and never named to lvm2; a PV of the VG stays a
// member; a disk both entries select is refused by both.
func TestDiskSetupTakesOnlyBlankDisks(t *testing.T) {
	n := &diskNode{
		disks: []disks.Disk{disk("vdb", 10<<30), disk("vdc", 10<<30), disk("vdd", 10<<30), disk("vde", 10<<30),
			disk("vdf", 10<<30), disk("vdg", 20<<30)},
		sigs: map[string]disks.Signatures{"/dev/vdb": {}, "/dev/vdc": {}, "/dev/vdd": {Type: "ext4", Usage: "filesystem"},
			"/dev/vdf": {}, "/dev/vdg": {}},
	}
	l := &diskLVM{pvs: []lvm.PV{{Name: "/dev/vdf", VGName: "old"}}}
	decl := declare(t, `
volumeGroups:
- volumeGroup: fresh
  paths: ["/dev/vd[b-e]", "/dev/vdg"]
- volumeGroup: old
  paths: ["/dev/vdf", "/dev/vdg"]
`)
	plans, err := n.setup(l).Apply(context.Background(), decl, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.took(t, "vgcreate fresh /dev/vdb /dev/vdc")
	refused := map[string]string{}
	for _, p := range plans {
		for _, r := range p.Refused {
			refused[p.VG+" "+r.Device] = r.Reason
		}
	}
	for _, want := range []string{"fresh /dev/vdd", "fresh /dev/vde", "fresh /dev/vdg", "old /dev/vdg"} {
		if refused[want] == "" {
			t.Errorf("%s not refused; refusals %v", want, refused)
		}
	}
	if len(plans) != 2 || !slices.Equal(plans[1].Members, []string{"/dev/vdf"}) {
		t.Errorf("plans %+v, want old's member /dev/vdf", plans)
	}
	if n.probed["/dev/vdg"] != 1 {
		t.Errorf("a disk two entries select probed %d times, want once", n.probed["/dev/vdg"])
	}

	// The next pass, the VG made: a blank disk that appears extends it.
	l.pvs = append(l.pvs, lvm.PV{Name: "/dev/vdb", VGName: "fresh"}, lvm.PV{Name: "/dev/vdc", VGName: "fresh"})
	n.disks = append(n.disks, disk("vdh", 10<<30))
	n.sigs["/dev/vdh"] = disks.Signatures{}
	decl = declare(t, `
volumeGroups:
- volumeGroup: fresh
  paths: ["/dev/vd[bch]"]
`)
	if _, err := n.setup(l).Apply(context.Background(), decl, nil); err != nil {
		t.Fatal(err)
	}
	l.took(t, "vgextend fresh /dev/vdh")
}

// A failing command is reported with its volume group and disks, and the
// other entries are still carried out; a node the declaration does not
// name gets nothing, and is not even scanned; a declaration that gives a
// node one VG twice is an error before anything runs.
func TestDiskSetupFailuresAndOtherNodes(t *testing.T) {
	n := &diskNode{disks: []disks.Disk{disk("vdb", 10<<30), disk("vdc", 10<<30)},
		sigs: map[string]disks.Signatures{"/dev/vdb": {}, "/dev/vdc": {}}}
	l := &diskLVM{fail: "a"}
	decl := declare(t, `
volumeGroups:
- volumeGroup: a
  paths: ["/dev/vdb"]
- volumeGroup: b
  paths: ["/dev/vdc"]
`)
	_, err := n.setup(l).Apply(context.Background(), decl, nil)
	if err == nil || !strings.Contains(err.Error(), "volume group a from declared disks [/dev/vdb]") {
		t.Errorf("err %v, want volume group a's failure", err)
	}
	l.took(t, "vgcreate a /dev/vdb", "vgcreate b /dev/vdc")

	other := declare(t, `
volumeGroups:
- volumeGroup: a
  nodes: [node-b]
  paths: ["/dev/vdb"]
`)
	s := n.setup(l)
	s.Scan = func() ([]disks.Disk, error) { t.Error("scanned for a declaration of another node"); return nil, nil }
	if plans, err := s.Apply(context.Background(), other, nil); err != nil || plans != nil || l.calls != nil {
		t.Errorf("another node's declaration: plans %+v, err %v, commands %q", plans, err, l.calls)
	}

	// A VG the node does not serve is not made: Carve would never use it.
	s = n.setup(l)
	s.Served = []string{"b"}
	l.fail = ""
	if _, err := s.Apply(context.Background(), decl, nil); err == nil || !strings.Contains(err.Error(), "volume group a is declared for node node-a, which does not serve it") {
		t.Errorf("a VG the node does not serve: %v", err)
	}
	l.took(t, "vgcreate b /dev/vdc")

	twice := declare(t, `
volumeGroups:
- volumeGroup: a
  nodes: [node-a]
  paths: ["/dev/vdb"]
- volumeGroup: a
  nodeSelector: {disk: "yes"}
  paths: ["/dev/vdc"]
`)
	if _, err := n.setup(l).Apply(context.Background(), twice, map[string]string{"disk": "yes"}); !errors.Is(err, disks.ErrInvalid) || l.calls != nil {
		t.Errorf("one VG declared twice for the node: %v, commands %q", err, l.calls)
	}
}
