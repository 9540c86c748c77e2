// Package results is the machine-readable form of one benchmark run
// (test/bench): what the run inside the VM writes and what the report on
// the host reads to print the table and draw the plots.
package results

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// Run is one run of the VM benchmark, every figure measured on one VG.
type Run struct {
	Mode     string        `json:"mode"` // "quick" or "full"
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration_ns"`
	Kernel   string        `json:"kernel"`
	Rows     []Row         `json:"rows"`
	Scale    []ScalePoint  `json:"scale,omitempty"`
	Idle     *Idle         `json:"idle,omitempty"`
}

// Row compares one operation done by Carve with the same done raw. Raw and
// Carve are medians of the samples; for a latency the unit is seconds, for
// a throughput MiB/s, for a rate per minute.
type Row struct {
	Section string    `json:"section"`
	Op      string    `json:"op"`
	Unit    string    `json:"unit"`
	Raw     float64   `json:"raw"`   // 0: no raw counterpart
	Carve   float64   `json:"carve"` // median
	Wipe    float64   `json:"wipe"`  // median of the part spent zeroing on delete, in Carve's figure
	Goal    Goal      `json:"goal"`
	RawS    []float64 `json:"raw_samples,omitempty"`
	CarveS  []float64 `json:"carve_samples,omitempty"`
	WipeS   []float64 `json:"wipe_samples,omitempty"`
	// Commands Carve ran for its last sample, by command (lvm's
	// subcommand for lvm): what its figure is made of.
	Commands map[string]float64 `json:"commands,omitempty"`
	Note     string             `json:"note,omitempty"`
	// The same operation through TopoLVM's lvmd (section lvmd): its
	// median, its samples and the lvm2 commands it ran for its last
	// sample. 0 and empty in every other row.
	LVMD         float64            `json:"lvmd,omitempty"`
	LVMDS        []float64          `json:"lvmd_samples,omitempty"`
	LVMDCommands map[string]float64 `json:"lvmd_commands,omitempty"`
}

// Goal is the target Carve is held to in a row (docs/performance.md's
// table lists them): Of is "ratio" (Carve/raw),
// "lvmd" (Carve/lvmd) or "carve" (Carve's figure itself), compared with Value by Op ("<=", "<",
// ">=").
type Goal struct {
	Of    string  `json:"of"`
	Op    string  `json:"op"`
	Value float64 `json:"value"`
}

// Ratio is Carve's figure over raw's, 0 when there is no raw figure.
func (r Row) Ratio() float64 {
	if r.Raw == 0 {
		return 0
	}
	return r.Carve / r.Raw
}

// LVMDRatio is Carve's figure over lvmd's, 0 when there is no lvmd figure.
func (r Row) LVMDRatio() float64 {
	if r.LVMD == 0 {
		return 0
	}
	return r.Carve / r.LVMD
}

// Met tells whether the row reaches its goal; ok is false when the row has
// no goal or lacks the figure to judge it.
func (r Row) Met() (met, ok bool) {
	v := r.Carve
	if r.Goal.Of == "ratio" {
		if r.Raw == 0 {
			return false, false
		}
		v = r.Ratio()
	}
	if r.Goal.Of == "lvmd" {
		if r.LVMD == 0 {
			return false, false
		}
		v = r.LVMDRatio()
	}
	switch r.Goal.Op {
	case "<=":
		return v <= r.Goal.Value, true
	case "<":
		return v < r.Goal.Value, true
	case ">=":
		return v >= r.Goal.Value, true
	}
	return false, false
}

// IsLVM tells lvm2's commands among carve's (or lvmd's): named by
// subcommand, lv*, vg*, pv* or fullreport (lvmd's report).
func IsLVM(cmd string) bool {
	return strings.HasPrefix(cmd, "lv") || strings.HasPrefix(cmd, "vg") || strings.HasPrefix(cmd, "pv") || cmd == "fullreport"
}

// LVMRuns counts the lvm2 runs among commands.
func LVMRuns(commands map[string]float64) int {
	n := 0.0
	for cmd, v := range commands {
		if IsLVM(cmd) {
			n += v
		}
	}
	return int(n)
}

// ScalePoint holds the latencies of the read calls and of CreateVolume
// with N volumes in the VG, and carve's resident memory then.
type ScalePoint struct {
	N        int                `json:"n"`
	Ops      map[string]Latency `json:"ops"` // by operation name
	RSSBytes int64              `json:"rss_bytes"`
	// Commands carve ran for one call of each operation, by command.
	Commands map[string]map[string]float64 `json:"commands,omitempty"`
}

// Latency is a distribution's p50 and p99, in seconds.
type Latency struct {
	P50     float64 `json:"p50"`
	P99     float64 `json:"p99"`
	Samples int     `json:"samples"`
}

// Idle is what carve ran while nothing changed.
type Idle struct {
	Volumes       int            `json:"volumes"`
	Window        time.Duration  `json:"window_ns"`
	CapacityCalls int            `json:"capacity_calls"` // GetCapacity calls the bench made in the window
	Commands      map[string]int `json:"commands"`       // lvm runs by subcommand
	PerMinute     float64        `json:"lvm_per_minute"`
}

// Write stores run as indented JSON at path.
func Write(path string, run *Run) error {
	b, err := json.MarshalIndent(run, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

// Read loads a run Write stored.
func Read(path string) (*Run, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	var run Run
	if err := json.Unmarshal(b, &run); err != nil {
		return nil, fmt.Errorf("decode results %s: %w", path, err)
	}
	return &run, nil
}
