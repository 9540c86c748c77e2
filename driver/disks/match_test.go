package disks

import (
	"reflect"
	"testing"
)

const gib = 1 << 30

// matchDisks are a node's disks as Scan would give them, out of order.
var matchDisks = []Disk{
	{Name: "sdc", Path: "/dev/sdc", Size: 4000 * gib, Model: "ST4000NM0035",
		Links: []string{"/dev/disk/by-id/ata-ST4000NM0035_Z1", "/dev/disk/by-path/pci-0000:00:17.0-ata-3"}},
	{Name: "nvme0n1", Path: "/dev/nvme0n1", Size: 1000 * gib, Model: "Samsung SSD 970 EVO Plus 1TB",
		Links: []string{"/dev/disk/by-id/nvme-Samsung_SSD_970_EVO_Plus_1TB_S4"}},
	{Name: "nvme1n1", Path: "/dev/nvme1n1", Size: 2000 * gib, Model: "Samsung SSD 980 PRO 2TB",
		Links: []string{"/dev/disk/by-id/nvme-Samsung_SSD_980_PRO_2TB_S6"}},
	{Name: "sdb", Path: "/dev/sdb", Size: 100 * gib, Model: "ST4000NM0035"},
	{Name: "vdb", Path: "/dev/vdb", Size: 20 * gib},
	{Name: "loop0", Path: "/dev/loop0", Size: 1000 * gib, Special: true},
	{Name: "dm-3", Path: "/dev/dm-3", Size: 4000 * gib, Special: true,
		Links: []string{"/dev/disk/by-id/dm-name-mpatha", "/dev/mapper/mpatha"}},
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    VGDecl
		want []string
	}{
		{"kernel name", VGDecl{Paths: []string{"/dev/sdb"}}, []string{"/dev/sdb"}},
		{"by-id glob", VGDecl{Paths: []string{"/dev/disk/by-id/nvme-Samsung*"}}, []string{"/dev/nvme0n1", "/dev/nvme1n1"}},
		{"by-path link", VGDecl{Paths: []string{"/dev/disk/by-path/pci-0000:00:17.0-ata-3"}}, []string{"/dev/sdc"}},
		{"several paths, sorted", VGDecl{Paths: []string{"/dev/vdb", "/dev/sd?"}}, []string{"/dev/sdb", "/dev/sdc", "/dev/vdb"}},
		{"star stops at slash", VGDecl{Paths: []string{"/dev/*"}}, []string{"/dev/nvme0n1", "/dev/nvme1n1", "/dev/sdb", "/dev/sdc", "/dev/vdb"}},
		{"no such path", VGDecl{Paths: []string{"/dev/sdz"}}, nil},
		{"min size", VGDecl{MinSize: "1000Gi"}, []string{"/dev/nvme0n1", "/dev/nvme1n1", "/dev/sdc"}},
		{"max size", VGDecl{MaxSize: "100Gi"}, []string{"/dev/sdb", "/dev/vdb"}},
		{"size range inclusive", VGDecl{MinSize: "1000Gi", MaxSize: "2000Gi"}, []string{"/dev/nvme0n1", "/dev/nvme1n1"}},
		{"size range just missed", VGDecl{MinSize: "1000Gi", MaxSize: "2147483647999"}, []string{"/dev/nvme0n1"}},
		{"model glob", VGDecl{Model: "ST4000*"}, []string{"/dev/sdb", "/dev/sdc"}},
		{"model and size", VGDecl{Model: "ST4000*", MinSize: "1Ti"}, []string{"/dev/sdc"}},
		{"model star skips disks with none", VGDecl{Model: "*"}, []string{"/dev/nvme0n1", "/dev/nvme1n1", "/dev/sdb", "/dev/sdc"}},
		{"path and model", VGDecl{Paths: []string{"/dev/disk/by-id/nvme-*"}, Model: "*980*"}, []string{"/dev/nvme1n1"}},
		{"special by glob never", VGDecl{Paths: []string{"/dev/loop*", "/dev/dm-*", "/dev/mapper/*"}}, nil},
		{"special by exact path", VGDecl{Paths: []string{"/dev/loop0"}}, []string{"/dev/loop0"}},
		{"special by exact link", VGDecl{Paths: []string{"/dev/mapper/mpatha"}}, []string{"/dev/dm-3"}},
		{"special named but too small", VGDecl{Paths: []string{"/dev/mapper/mpatha"}, MaxSize: "1Ti"}, nil},
		{"special by escaped glob never", VGDecl{Paths: []string{`/dev/loo\p0`}}, nil},
		{"unparsed size selects nothing", VGDecl{Paths: []string{"/dev/sdb"}, MinSize: "x"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, d := range Match(tc.d, matchDisks) {
				got = append(got, d.Path)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
