package table

import (
	"strings"
	"testing"

	"carve.dev/carve/test/bench/results"
)

func TestTableWithoutLVMD(t *testing.T) {
	r := &results.Run{Mode: "quick", Rows: []results.Row{{Op: "thin create+delete, serial", Unit: "s", Raw: 0.5, Carve: 1,
		Goal: results.Goal{Of: "ratio", Op: "<=", Value: 1.15}, Commands: map[string]float64{"lvcreate": 1, "lvremove": 1}}}}
	var b strings.Builder
	if err := Markdown(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, "lvmd") {
		t.Errorf("a run without lvmd figures has lvmd columns:\n%s", out)
	}
	if !strings.Contains(out, "| thin create+delete, serial | 500 ms | 1.00 s | - | 2.00 | ratio <= 1.15 | NO | 2 |") {
		t.Errorf("row:\n%s", out)
	}
}

func TestTableWithLVMD(t *testing.T) {
	r := &results.Run{Mode: "full", Rows: []results.Row{
		{Op: "thick create, serial", Unit: "s", Raw: 0.5, Carve: 0.6, LVMD: 1.2, Goal: results.Goal{Of: "lvmd", Op: "<=", Value: 0.67},
			Commands: map[string]float64{"lvcreate": 1}, LVMDCommands: map[string]float64{"lvcreate": 1, "fullreport": 2, "vgs": 1}},
		{Op: "GetCapacity", Unit: "s", Carve: 0.01},
	}}
	var b strings.Builder
	if err := Markdown(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| operation | raw | carve | lvmd | wipe | ratio | carve/lvmd | goal | met? | carve's lvm runs | lvmd's lvm runs |",
		"| thick create, serial | 500 ms | 600 ms | 1.20 s | - | 1.20 | 0.50 | carve/lvmd <= 0.67 | yes | 1 | 4 |",
		"| GetCapacity | - | 10 ms | - | - | - | - | - | - | - | - |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no line %q in\n%s", want, out)
		}
	}
}
