package disks

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fakeSys builds a sysfs block directory and a device directory in a
// temporary directory: files maps a path under sys/block ("sda/size") or
// dev ("dev/disk/by-id/x -> ../../sda" makes a symlink) to its content.
func fakeSys(t *testing.T, files map[string]string) (sysBlock, devDir string) {
	t.Helper()
	root := t.TempDir()
	sysBlock, devDir = filepath.Join(root, "sys", "block"), filepath.Join(root, "dev")
	for _, dir := range []string{sysBlock, devDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range files {
		p := filepath.Join(sysBlock, name)
		if rest, ok := strings.CutPrefix(name, "dev/"); ok {
			p = filepath.Join(devDir, rest)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(content, "-> "); ok {
			err = os.Symlink(target, p)
		} else if strings.HasSuffix(name, "/") {
			err = os.MkdirAll(p, 0o755)
		} else {
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return sysBlock, devDir
}

func TestScan(t *testing.T) {
	sysBlock, devDir := fakeSys(t, map[string]string{
		"sda/size":                   "3907029168\n",
		"sda/ro":                     "0\n",
		"sda/device/model":           "ST2000DM008-2FR1\n",
		"sda/sda1/partition":         "1\n",
		"sda/sda1/size":              "2048\n",
		"sda/sda2/partition":         "2\n",
		"sda/holders/":               "",
		"sda/queue/rotational":       "1\n",
		"nvme0n1/size":               "1953525168\n",
		"nvme0n1/ro":                 "0\n",
		"nvme0n1/device/model":       "Samsung SSD 970 EVO Plus 1TB           \n",
		"nvme0n1/holders/dm-0":       "",
		"sr0/size":                   "2097151\n",
		"sr0/ro":                     "1\n",
		"loop3/size":                 "0\n",
		"vdb/size":                   "20971520\n",
		"vdb/ro":                     "1\n",
		"cciss!c0d0/size":            "8\n",
		"gone/":                      "",
		"dev/disk/by-id/wwn-0x5000c": "-> ../../sda",
		"dev/disk/by-id/ata-ST2000":  "-> ../../sda",
		"dev/disk/by-id/ata-ST-p1":   "-> ../../sda1",
		"dev/disk/by-path/pci-0:1":   "-> ../../nvme0n1",
		"dev/disk/by-id/nvme-Sam":    "-> ../../nvme0n1",
		"dev/disk/by-id/not-a-link":  "plain file",
		"dev/mapper/control":         "plain file",
	})
	got, err := Scan(sysBlock, devDir)
	if err != nil {
		t.Fatal(err)
	}
	dev := func(s string) string { return filepath.Join(devDir, s) }
	want := []Disk{
		{Name: "cciss!c0d0", Path: dev("cciss/c0d0"), Size: 4096},
		{Name: "loop3", Path: dev("loop3"), Special: true},
		{Name: "nvme0n1", Path: dev("nvme0n1"), Size: 1953525168 * 512, Model: "Samsung SSD 970 EVO Plus 1TB",
			Holders: []string{"dm-0"}, Links: []string{dev("disk/by-id/nvme-Sam"), dev("disk/by-path/pci-0:1")}},
		{Name: "sda", Path: dev("sda"), Size: 3907029168 * 512, Model: "ST2000DM008-2FR1",
			Partitions: []string{"sda1", "sda2"}, Links: []string{dev("disk/by-id/ata-ST2000"), dev("disk/by-id/wwn-0x5000c")}},
		{Name: "sr0", Path: dev("sr0"), Size: 2097151 * 512, ReadOnly: true, Special: true},
		{Name: "vdb", Path: dev("vdb"), Size: 20971520 * 512, ReadOnly: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", got, want)
	}
}

func TestScanSpecialNames(t *testing.T) {
	files := map[string]string{}
	for _, n := range []string{"loop0", "ram1", "zram0", "sr1", "fd0", "dm-4", "md127", "nbd2", "sdb", "nvme1n1", "vda", "mmcblk0", "xvdf"} {
		files[n+"/size"] = "8"
	}
	sysBlock, devDir := fakeSys(t, files)
	got, err := Scan(sysBlock, devDir)
	if err != nil {
		t.Fatal(err)
	}
	special := map[string]bool{}
	for _, d := range got {
		special[d.Name] = d.Special
	}
	want := map[string]bool{"loop0": true, "ram1": true, "zram0": true, "sr1": true, "fd0": true, "dm-4": true, "md127": true, "nbd2": true,
		"sdb": false, "nvme1n1": false, "vda": false, "mmcblk0": false, "xvdf": false}
	if !reflect.DeepEqual(special, want) {
		t.Fatalf("special: got %v, want %v", special, want)
	}
}

func TestScanErrors(t *testing.T) {
	if _, err := Scan(filepath.Join(t.TempDir(), "none"), t.TempDir()); err == nil || !strings.Contains(err.Error(), "list block devices") {
		t.Errorf("missing sysfs: got %v", err)
	}
	sysBlock, devDir := fakeSys(t, map[string]string{"sdc/size": "lots\n"})
	if _, err := Scan(sysBlock, devDir); err == nil || !strings.Contains(err.Error(), `block device sdc: size: strconv.ParseUint: parsing "lots"`) {
		t.Errorf("bad size: got %v", err)
	}
}
