package lvm

import (
	"os"
	"path/filepath"
	"testing"
)

// addFixtureSeeds seeds a fuzz target with every recorded JSON report.
func addFixtureSeeds(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.json")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"report":[{"lv":[{"lv_name":"[x]","lv_attr":"V","lv_size":"1","data_percent":"NaN"}]}]}`))
	f.Add([]byte(`{"report":[{"lv":[{"lv_name":"[","lv_attr":"","lv_size":"-1"}]},{"vg":[]}]}`))
	f.Add([]byte(`{"report":[{"vg":[{"pv_count":"99999999999999999999"}]}]}`))
	f.Add([]byte(`{"report":null}`))
}

// FuzzParseReports feeds arbitrary bytes to the three report parsers: they
// may reject input, never panic, and a parsed LV keeps its invariants.
func FuzzParseReports(f *testing.F) {
	addFixtureSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		lvs, err := parseLVs(data)
		if err == nil {
			for _, lv := range lvs {
				_ = lv.IsThinPool() || lv.IsThinVolume() || lv.IsCOWSnapshot() || lv.HasCOWSnapshots() || lv.HasTag("x")
				if lv.ThinPoolFree() > lv.Size {
					t.Fatalf("ThinPoolFree %d > Size %d", lv.ThinPoolFree(), lv.Size)
				}
				if lv.Hidden && len(lv.Name)+2 > len(data) {
					t.Fatalf("hidden name %q longer than the input", lv.Name)
				}
			}
		}
		_, _ = parseVGs(data)
		_, _ = parsePVs(data)
	})
}
