package e2e

import (
	"strings"
	"testing"
)

func TestOperationSecondsParsesTheSumLines(t *testing.T) {
	for line, want := range map[string]float64{
		`carve_csi_operation_duration_seconds_sum{method="/csi.v1.Controller/CreateVolume"} 2.5`: 2.5,
		`carve_csi_operation_duration_seconds_sum{method="/csi.v1.Node/NodeStageVolume"} 0.25`:   0.25,
	} {
		if m, v, ok := operationSeconds(line); !ok || v != want || !strings.Contains(line, "/"+m+`"}`) {
			t.Errorf("%q: %q %v %v", line, m, v, ok)
		}
	}
	for _, line := range []string{
		`carve_csi_operation_duration_seconds_count{method="/csi.v1.Controller/CreateVolume"} 2`,
		`carve_csi_operation_duration_seconds_bucket{method="/csi.v1.Node/NodeStageVolume",le="0.1"} 1`,
		`# HELP carve_csi_operation_duration_seconds Duration of CSI calls, by method.`,
	} {
		if _, _, ok := operationSeconds(line); ok {
			t.Errorf("%q parsed as a sum", line)
		}
	}
}

func TestCSISecondsMinusAndTotal(t *testing.T) {
	before := csiSeconds{"CreateVolume": 1, "NodeStageVolume": 2}
	after := csiSeconds{"CreateVolume": 3.5, "NodeStageVolume": 2, "NodePublishVolume": 0.5}
	d := after.minus(before)
	d["DeleteVolume"] = 4
	if len(d) != 3 || d["CreateVolume"] != 2.5 || d["NodePublishVolume"] != 0.5 || d.total() != 7 || d.setup() != 3 {
		t.Errorf("minus = %v (total %v)", d, d.total())
	}
	if got := d.String(); got != "CreateVolume 2.50 s, DeleteVolume 4.00 s, NodePublishVolume 0.50 s" {
		t.Errorf("String() = %q", got)
	}
}
