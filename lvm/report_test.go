package lvm

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

const mib = 1 << 20

// The fixtures were recorded by testdata/capture.sh on real lvm2 2.03.16.

func parseLVFixture(t *testing.T, name string) map[string]LV {
	t.Helper()
	lvs, err := parseLVs(fixture(t, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]LV{}
	for _, lv := range lvs {
		byName[lv.Name] = lv
	}
	if len(byName) != len(lvs) {
		t.Fatalf("%s: duplicate LV names", name)
	}
	return byName
}

func TestParseLinearLVs(t *testing.T) {
	lvs := parseLVFixture(t, "linear-lvs")
	want := LV{
		Name: "vol1", VGName: "carve-linear", UUID: "tkQjwE-UOyL-8K33-zM9c-pemN-ItSK-l2lyFN",
		Path: "/dev/carve-linear/vol1", DMPath: "/dev/mapper/carve--linear-vol1",
		Size: 12 * mib, Attr: "-wi-ao----", Tags: []string{"carve.dev/volume=pvc-1", "owner=node-a"},
		Layout: "linear", Role: "public", Active: true, Open: true, ExtentSize: 4 * mib,
		CreationTime: time.Date(2026, 11, 23, 0, 16, 37, 0, time.UTC), // the VM's clock
		// Recorded before lv_kernel_major/minor were asked for: unknown.
		KernelMajor: -1, KernelMinor: -1,
	}
	if got := lvs["vol1"]; !reflect.DeepEqual(got, want) {
		t.Errorf("vol1:\n got %+v\nwant %+v", got, want)
	}
	// Inactive: lv_active is "" and lv_device_open "unknown".
	v2 := lvs["vol-2.x+y"]
	if v2.Active || v2.Open || v2.Size != 8*mib || !v2.HasTag("a/b=c!:&#") || v2.HasTag("a") ||
		v2.DMPath != "/dev/mapper/carve--linear-vol--2.x+y" {
		t.Errorf("vol-2.x+y = %+v", v2)
	}
	v3 := lvs["vol3"]
	if !v3.Active || v3.Open || v3.Tags != nil || v3.IsThinPool() || v3.Hidden {
		t.Errorf("vol3 = %+v", v3)
	}
}

// TestParseKernelDevice: an active LV reports the device number of its
// device node (recorded beside the report with stat), an inactive one -1.
func TestParseKernelDevice(t *testing.T) {
	lvs := parseLVFixture(t, "kernel-lvs")
	var major, minor int
	if _, err := fmt.Sscanf(strings.TrimSpace(string(fixture(t, "kernel-on.devnum"))), "%x:%x", &major, &minor); err != nil {
		t.Fatal(err)
	}
	if on := lvs["on"]; on.KernelMajor != major || on.KernelMinor != minor {
		t.Errorf("active LV: device %d:%d, its node is %d:%d", on.KernelMajor, on.KernelMinor, major, minor)
	}
	if off := lvs["off"]; off.KernelMajor != -1 || off.KernelMinor != -1 {
		t.Errorf("inactive LV: device %d:%d, want -1:-1", off.KernelMajor, off.KernelMinor)
	}
	for _, bad := range []string{"x", "-2", "99999999"} {
		p := fieldParser{}
		if p.deviceNumber("lv_kernel_major", bad); p.err == nil {
			t.Errorf("device number %q accepted", bad)
		}
	}
}

func TestParseThinLVs(t *testing.T) {
	lvs := parseLVFixture(t, "thin-lvs")
	if len(lvs) != 4 {
		t.Fatalf("got %d LVs, want pool0, thin1, thinsnap1, thinsnap2", len(lvs))
	}
	pool := lvs["pool0"]
	// A thin pool has no /dev/vg/lv path and is "open" while thin LVs are active.
	if !pool.IsThinPool() || pool.IsThinVolume() || pool.Layout != "thin,pool" || pool.Role != "private" ||
		pool.Path != "" || pool.Size != 64*mib || pool.DataPercent != 12.5 || pool.MetadataPercent != 10.94 || !pool.Open {
		t.Errorf("pool0 = %+v", pool)
	}
	thin := lvs["thin1"]
	if !thin.IsThinVolume() || thin.IsThinPool() || thin.PoolLV != "pool0" || thin.Layout != "thin,sparse" ||
		thin.DataPercent != 25 || thin.MetadataPercent != 0 || !thin.HasTag("carve.dev/volume=pvc-t") {
		t.Errorf("thin1 = %+v", thin)
	}
	snap1 := lvs["thinsnap1"]
	if snap1.Origin != "thin1" || snap1.PoolLV != "pool0" || !snap1.SkipActivation || snap1.Active ||
		snap1.DataPercent != 0 || snap1.Role != "public,snapshot,thinsnapshot" {
		t.Errorf("thinsnap1 = %+v", snap1)
	}
	snap2 := lvs["thinsnap2"]
	if snap2.SkipActivation || !snap2.Active || snap2.DataPercent != 25 {
		t.Errorf("thinsnap2 = %+v", snap2)
	}
}

func TestParseHiddenLVs(t *testing.T) {
	for name, hidden := range map[string][]string{
		"thin-lvs-all":  {"lvol0_pmspare", "pool0_tdata", "pool0_tmeta"},
		"raid1-lvs-all": {"mirror1_rimage_0", "mirror1_rimage_1", "mirror1_rmeta_0", "mirror1_rmeta_1"},
		"cow-lvs-all":   nil, // a COW snapshot's exception store is not listed
	} {
		lvs := parseLVFixture(t, name)
		var got []string
		for _, lv := range lvs {
			if lv.Hidden {
				got = append(got, lv.Name)
			}
		}
		if len(got) != len(hidden) {
			t.Errorf("%s: hidden = %v, want %v", name, got, hidden)
		}
		for _, h := range hidden {
			if !lvs[h].Hidden {
				t.Errorf("%s: %s not hidden", name, h)
			}
		}
	}
	if lv := parseLVFixture(t, "thin-lvs-all")["pool0_tdata"]; lv.Path != "" || lv.Size != 64*mib || lv.Role != "private,thin,pool,data" {
		t.Errorf("pool0_tdata = %+v", lv)
	}
}

func TestParseCOWSnapshots(t *testing.T) {
	lvs := parseLVFixture(t, "cow-lvs")
	origin := lvs["origin1"]
	if !origin.HasCOWSnapshots() || origin.IsCOWSnapshot() || origin.Origin != "" {
		t.Errorf("origin1 = %+v", origin)
	}
	snap1 := lvs["snap1"]
	if !snap1.IsCOWSnapshot() || snap1.Origin != "origin1" || snap1.SnapshotInvalid || snap1.DataPercent != 50.23 || snap1.Size != 24*mib {
		t.Errorf("snap1 = %+v", snap1)
	}
	// snap2 overflowed: attr state 'I', usage 100%.
	snap2 := lvs["snap2"]
	if !snap2.SnapshotInvalid || snap2.DataPercent != 100 || !snap2.Active {
		t.Errorf("snap2 = %+v", snap2)
	}
}

func TestParseStripedAndRAID(t *testing.T) {
	stripe := parseLVFixture(t, "striped-lvs")["stripe1"]
	if stripe.Layout != "striped" || stripe.Size != 16*mib || !stripe.Active {
		t.Errorf("stripe1 = %+v", stripe)
	}
	mirror := parseLVFixture(t, "raid1-lvs")["mirror1"]
	if mirror.Layout != "raid,raid1" || mirror.SyncPercent != 100 || mirror.Size != 16*mib || mirror.Health != "" {
		t.Errorf("mirror1 = %+v", mirror)
	}
}

func TestParsePartial(t *testing.T) {
	lvs := parseLVFixture(t, "partial-lvs")
	for name, partial := range map[string]bool{"both": true, "onb": true, "ona": false} {
		lv := lvs[name]
		if lv.Partial != partial || (lv.Health == "partial") != partial || lv.Active {
			t.Errorf("%s = %+v, want partial=%v", name, lv, partial)
		}
	}
	vgs, err := parseVGs(fixture(t, "partial-vg.json"))
	if err != nil || len(vgs) != 1 {
		t.Fatalf("parseVGs = %v, %v", vgs, err)
	}
	if vg := vgs[0]; !vg.Partial || vg.MissingPVCount != 1 || vg.PVCount != 2 || vg.Free != 0 || vg.LVCount != 3 {
		t.Errorf("vg = %+v", vg)
	}
	pvs, err := parsePVs(fixture(t, "partial-pvs.json"))
	if err != nil || len(pvs) != 2 {
		t.Fatalf("parsePVs = %v, %v", pvs, err)
	}
	if pvs[0].Missing || !pvs[1].Missing || pvs[1].Name != "[unknown]" || pvs[1].VGName != "carve-partial" {
		t.Errorf("pvs = %+v", pvs)
	}
}

func TestParseVGs(t *testing.T) {
	vgs, err := parseVGs(fixture(t, "linear-vg.json"))
	if err != nil || len(vgs) != 1 {
		t.Fatalf("parseVGs = %v, %v", vgs, err)
	}
	want := VG{
		Name: "carve-linear", UUID: "h6Tjey-4MdB-NvG6-JAbf-s3lM-AR8T-jI0Ta7",
		Size: 4290772992, Free: 4265607168, ExtentSize: 4 * mib, ExtentCount: 1023, FreeCount: 1017,
		PVCount: 1, LVCount: 3, Attr: "wz--n-", Tags: []string{"carve.dev/node=node-a"},
	}
	if !reflect.DeepEqual(vgs[0], want) {
		t.Errorf("vg:\n got %+v\nwant %+v", vgs[0], want)
	}
	if vgs[0].Size != vgs[0].ExtentSize*vgs[0].ExtentCount || vgs[0].Free != vgs[0].ExtentSize*vgs[0].FreeCount {
		t.Error("sizes disagree with extent counts")
	}
}

// A VG whose metadata area 1066 LVs filled (lvm2 2.03.16, default area):
// the fields that tell it, whatever the data space.
func TestParseVGMetadataArea(t *testing.T) {
	vgs, err := parseVGs(fixture(t, "mdafull-vg.json"))
	if err != nil || len(vgs) != 1 {
		t.Fatalf("parseVGs = %v, %v", vgs, err)
	}
	vg := vgs[0]
	if vg.MetadataSize != 1044480 || vg.MetadataFree != 0 || vg.LVCount != 1066 || vg.Free != 981*4*mib {
		t.Errorf("vg = %+v", vg)
	}
}

func TestParseEmpty(t *testing.T) {
	lvs, err := parseLVs(fixture(t, "empty-lvs.json"))
	if err != nil || len(lvs) != 0 {
		t.Errorf("empty VG's lvs = %v, %v", lvs, err)
	}
	pvs, err := parsePVs(fixture(t, "empty-pvs.json"))
	if err != nil || len(pvs) != 1 {
		t.Fatalf("pvs = %v, %v", pvs, err)
	}
	want := PV{Name: "/dev/vda", VGName: "carve-empty", UUID: "Rg1i4O-48TD-5eV8-V4Z9-1HBJ-1Hfu-vRhPwB",
		Size: 4290772992, Free: 4290772992, Attr: "a--"}
	if pvs[0] != want {
		t.Errorf("pv = %+v, want %+v", pvs[0], want)
	}
}

func TestParseRejectsBadInput(t *testing.T) {
	for _, in := range []string{
		``,
		`not json`,
		`{"report":[{"lv":[{"lv_name":"x","lv_size":"12.5"}]}]}`,
		`{"report":[{"lv":[{"lv_name":"x","lv_size":"-1"}]}]}`,
		`{"report":[{"lv":[{"lv_name":"x","data_percent":"lots"}]}]}`,
		`{"report":[{"lv":[{"lv_name":"x","lv_size":18446744073709551616}]}]}`,
	} {
		if lvs, err := parseLVs([]byte(in)); err == nil {
			t.Errorf("parseLVs(%s) = %+v, want an error", in, lvs)
		}
	}
	if _, err := parseVGs([]byte(`{"report":[{"vg":[{"pv_count":"99999999999999999999"}]}]}`)); err == nil {
		t.Error("parseVGs accepted an overflowing count")
	}
}

func TestAttrBitsOnShortAttr(t *testing.T) {
	lvs, err := parseLVs([]byte(`{"report":[{"lv":[{"lv_name":"x","lv_attr":"t"}]}]}`))
	if err != nil || !lvs[0].IsThinPool() || lvs[0].Partial || lvs[0].SkipActivation {
		t.Errorf("short attr: %+v, %v", lvs, err)
	}
}

func TestRoundUp(t *testing.T) {
	const top = ^uint64(0)
	for _, tc := range []struct{ size, extent, want uint64 }{
		{0, 4 * mib, 0},
		{1, 4 * mib, 4 * mib},
		{4 * mib, 4 * mib, 4 * mib},
		{4*mib + 1, 4 * mib, 8 * mib},
		{10 * mib, 4 * mib, 12 * mib},
		{1, 0, 1},
		{top, 1, top},
		{top - 1, 4 * mib, 0}, // no multiple fits: refused, never rounded down
		{top / (4 * mib) * (4 * mib), 4 * mib, top / (4 * mib) * (4 * mib)},
	} {
		if got := RoundUp(tc.size, tc.extent); got != tc.want {
			t.Errorf("RoundUp(%d, %d) = %d, want %d", tc.size, tc.extent, got, tc.want)
		}
	}
}

// TestCaptureScriptUsesClientFields keeps capture.sh's -o lists identical to
// the Client's, so that fixtures show exactly what the Client parses.
func TestCaptureScriptUsesClientFields(t *testing.T) {
	b, err := os.ReadFile("testdata/capture.sh")
	if err != nil {
		t.Fatal(err)
	}
	script := string(b)
	for name, fields := range map[string]string{"PV_FIELDS": pvFields, "VG_FIELDS": vgFields, "LV_FIELDS": lvFields} {
		m := regexp.MustCompile(`(?m)^` + name + `="([^"]*)"$`).FindStringSubmatch(script)
		if m == nil || m[1] != fields {
			t.Errorf("capture.sh %s = %v, want %q", name, m, fields)
		}
	}
	common := reportArgs("")[:len(reportArgs(""))-2] // all but -o fields
	quoted := make([]string, len(common))
	for i, a := range common {
		quoted[i] = a
		if strings.ContainsAny(a, ` "%`) {
			quoted[i] = "'" + a + "'"
		}
	}
	if want := `REPORT=(` + strings.Join(quoted, " ") + `)`; !strings.Contains(script, want) {
		t.Errorf("capture.sh REPORT does not match reportArgs: want %s", want)
	}
}

// lvs reports the VG's missing PVs with each LV, so that an operation that
// read the LV it changes needs no vgs to tell them.
func TestLVReportsItsVGMissingPVs(t *testing.T) {
	lvs, err := parseLVs([]byte(`{"report":[{"lv":[{"lv_name":"a","vg_name":"vg","vg_missing_pv_count":"1"},` +
		`{"lv_name":"b","vg_name":"vg","vg_missing_pv_count":""}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(lvs) != 2 || lvs[0].VGMissingPVs != 1 || lvs[1].VGMissingPVs != 0 {
		t.Errorf("parsed %+v, want VGMissingPVs 1 and 0", lvs)
	}
}
