//go:build bench

package bench

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// config holds the run's sizes and counts. The full run's are those the
// goals of docs/performance.md are judged at; the quick one (CARVE_BENCH_QUICK=1) runs every section
// with small counts, for development and for a check that all of it works.
type config struct {
	quick        bool
	reps         int           // interleaved raw/Carve pairs of a serial operation
	parallel     int           // operations at once in the parallel provisioning
	parReps      int           // interleaved raw/Carve batches of them
	scale        []int         // volume counts of the scale ladder
	scaleSamples int           // calls of each operation at each count
	idle         time.Duration // window of the idle count
	fioRuntime   time.Duration // each fio job
	fioReps      int           // interleaved raw/Carve pairs of each fio job
	copySize     int64         // thick snapshot copy
	shells       string        // carve's --lvm-shells, when set (CARVE_BENCH_LVM_SHELLS)
	out          string        // where results.json goes
}

func loadConfig(t *testing.T) config {
	t.Helper()
	c := config{reps: 7, parallel: 16, parReps: 3, scale: []int{10, 100, 500, 1000}, scaleSamples: 20,
		idle: 3 * time.Minute, fioRuntime: 15 * time.Second, fioReps: 2, copySize: 1 << 30}
	if os.Getenv("CARVE_BENCH_QUICK") == "1" {
		c = config{quick: true, reps: 3, parallel: 4, parReps: 1, scale: []int{10, 30}, scaleSamples: 5,
			idle: time.Minute, fioRuntime: 5 * time.Second, fioReps: 1, copySize: 128 << 20}
	}
	c.reps = envInt(t, "CARVE_BENCH_REPS", c.reps)
	c.parallel = envInt(t, "CARVE_BENCH_PARALLEL", c.parallel)
	c.fioReps = envInt(t, "CARVE_BENCH_FIO_REPS", c.fioReps)
	if s := os.Getenv("CARVE_BENCH_SCALE"); s != "" {
		c.scale = nil
		for _, f := range strings.Fields(s) {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				t.Fatalf("CARVE_BENCH_SCALE: %q is not a volume count", f)
			}
			c.scale = append(c.scale, n)
		}
	}
	if s := os.Getenv("CARVE_BENCH_IDLE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("CARVE_BENCH_IDLE: %v", err)
		}
		c.idle = d
	}
	if s := os.Getenv("CARVE_BENCH_LVM_SHELLS"); s != "" {
		if n, err := strconv.Atoi(s); err != nil || n < 0 {
			t.Fatalf("CARVE_BENCH_LVM_SHELLS=%q: want a number of shells, 0 or more", s)
		}
		c.shells = s
	}
	c.out = os.Getenv("CARVE_BENCH_OUT")
	if c.out == "" {
		c.out = t.TempDir()
	}
	return c
}

func envInt(t *testing.T, key string, def int) int {
	t.Helper()
	s := os.Getenv(key)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", key, s)
	}
	return n
}

func (c config) mode() string {
	if c.quick {
		return "quick"
	}
	return "full"
}
