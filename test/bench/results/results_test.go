package results

import (
	"path/filepath"
	"testing"
)

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	for _, tc := range []struct{ p, want float64 }{{50, 3}, {99, 5}, {0, 1}, {20, 1}, {21, 2}} {
		if got := Percentile(xs, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if Median(nil) != 0 {
		t.Error("median of nothing is not 0")
	}
	if got := Median([]float64{2, 1}); got != 1 {
		t.Errorf("median of two = %v, want the lower (nearest rank)", got)
	}
}

func TestMet(t *testing.T) {
	for _, tc := range []struct {
		row      Row
		met, ok  bool
		describe string
	}{
		{Row{Raw: 1, Carve: 1.1, Goal: Goal{"ratio", "<=", 1.15}}, true, true, "ratio under"},
		{Row{Raw: 1, Carve: 1.2, Goal: Goal{"ratio", "<=", 1.15}}, false, true, "ratio over"},
		{Row{Raw: 100, Carve: 95, Goal: Goal{"ratio", ">=", 0.9}}, true, true, "throughput"},
		{Row{Carve: 0.04, Goal: Goal{"carve", "<", 0.05}}, true, true, "absolute"},
		{Row{Carve: 1, Goal: Goal{"ratio", "<=", 1}}, false, false, "no raw figure"},
		{Row{Raw: 1, Carve: 1}, false, false, "no goal"},
		{Row{Raw: 1, Carve: 0.6, LVMD: 1, Goal: Goal{"lvmd", "<=", 0.67}}, true, true, "lvmd ratio under"},
		{Row{Raw: 1, Carve: 0.7, LVMD: 1, Goal: Goal{"lvmd", "<=", 0.67}}, false, true, "lvmd ratio over"},
		{Row{Raw: 1, Carve: 0.5, Goal: Goal{"lvmd", "<=", 0.67}}, false, false, "no lvmd figure"},
	} {
		met, ok := tc.row.Met()
		if met != tc.met || ok != tc.ok {
			t.Errorf("%s: met %v ok %v, want %v %v", tc.describe, met, ok, tc.met, tc.ok)
		}
	}
}

func TestWriteRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	in := &Run{Mode: "quick", Rows: []Row{{Op: "x", Raw: 1, Carve: 2}}, Idle: &Idle{Commands: map[string]int{"lvs": 3}}}
	if err := Write(path, in); err != nil {
		t.Fatal(err)
	}
	out, err := Read(path)
	if err != nil || len(out.Rows) != 1 {
		t.Fatalf("read back %+v, %v", out, err)
	}
	in.Rows = append(in.Rows, Row{Op: "y", Raw: 1, Carve: 1, LVMD: 4, LVMDCommands: map[string]float64{"lvcreate": 1}})
	if err := Write(path, in); err != nil {
		t.Fatal(err)
	}
	out, err = Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if out.Rows[0].Ratio() != 2 || out.Idle.Commands["lvs"] != 3 || out.Rows[0].LVMDRatio() != 0 {
		t.Fatalf("read back %+v", out)
	}
	if y := out.Rows[1]; y.LVMDRatio() != 0.25 || y.LVMDCommands["lvcreate"] != 1 {
		t.Fatalf("read back the lvmd figures %+v", y)
	}
}

func TestLVMRuns(t *testing.T) {
	got := LVMRuns(map[string]float64{"lvs": 3, "vgs": 1, "pvs": 1, "lvcreate": 1, "fullreport": 2, "blkdiscard": 2, "mkfs.ext4": 1})
	if got != 8 {
		t.Fatalf("LVMRuns = %d, want 8 (blkdiscard and mkfs are not lvm2)", got)
	}
}
