package e2e

// Carve's CSI time from its metrics, for the cluster benchmark
// (bench_test.go): not behind the e2e build tag, so that its unit test
// runs with the others (make test-unit).

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// csiSeconds is the time Carve's pods spent serving CSI calls, by method
// (the sums of carve_csi_operation_duration_seconds of the controller and
// of the VM node's carve node), at one moment. Between two readings it is
// Carve's own share of what Kubernetes waited for: CreateVolume holds the
// node agent's work, ControllerPublishVolume the activation, NodeStage and
// NodePublish the node path.
type csiSeconds map[string]float64

// operationSeconds parses one line of carve_csi_operation_duration_seconds_sum.
func operationSeconds(line string) (method string, v float64, ok bool) {
	rest, ok := strings.CutPrefix(line, `carve_csi_operation_duration_seconds_sum{method="`)
	if !ok {
		return "", 0, false
	}
	method, num, ok := strings.Cut(rest, `"} `)
	if !ok {
		return "", 0, false
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	return method[strings.LastIndex(method, "/")+1:], v, err == nil
}

// minus is s - before, by method, without the methods that did not move.
func (s csiSeconds) minus(before csiSeconds) csiSeconds {
	out := csiSeconds{}
	for m, v := range s {
		if d := v - before[m]; d > 0.0005 {
			out[m] = d
		}
	}
	return out
}

// setupMethods are the calls a pod with a new claim waits for, in order.
var setupMethods = []string{"CreateVolume", "ControllerPublishVolume", "NodeStageVolume", "NodePublishVolume"}

// setup is the time of the calls a new pod waited for (setupMethods).
func (s csiSeconds) setup() float64 {
	var sum float64
	for _, m := range setupMethods {
		sum += s[m]
	}
	return sum
}

func (s csiSeconds) total() float64 {
	var sum float64
	for _, v := range s {
		sum += v
	}
	return sum
}

func (s csiSeconds) String() string {
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(s)) {
		parts = append(parts, fmt.Sprintf("%s %.2f s", m, s[m]))
	}
	return strings.Join(parts, ", ")
}
