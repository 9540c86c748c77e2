//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"carve.dev/carve/test/bench/results"
)

// fioJob is one fio workload of the data path comparison.
type fioJob struct {
	name, rw, bs string
}

var fioJobs = []fioJob{
	{"random read 4k", "randread", "4k"},
	{"random write 4k", "randwrite", "4k"},
	{"sequential read 1M", "read", "1M"},
	{"sequential write 1M", "write", "1M"},
}

// dataPath runs the same fio jobs on a file in a Carve volume (ext4,
// through NodeStage and NodePublish) and in a raw LV formatted and
// mounted by hand, taking turns, and compares their bandwidths.
func (e *env) dataPath() {
	ctx := context.Background()
	size := int64(512 * mib)
	if e.cfg.quick {
		size = 256 * mib
	}
	v, err := e.create(ctx, e.name("pvc"), size, false, "ext4")
	e.must(err)
	carveDir := e.path("fio-target")
	e.must(v.Attach(ctx, node))
	e.must(stagePublish(ctx, v, e.path("fio-staging"), carveDir))
	raw := e.name("raw-fio")
	e.must(e.rawLV(ctx, raw, size, false))
	rawDir := e.path("raw-fio")
	e.must(os.Mkdir(rawDir, 0o750))
	_, err = e.dataCmd("mkfs.ext4", mkfsArgs("ext4", device(raw))...)
	e.must(err)
	_, err = e.cmd(ctx, "mount", "-t", "ext4", device(raw), rawDir)
	e.must(err)
	fileSize := size / 2
	for _, j := range fioJobs {
		rs, cs := e.pairs(e.cfg.fioReps, func() float64 { return e.fio(j, rawDir, fileSize) },
			func() float64 { return e.fio(j, carveDir, fileSize) })
		e.add(results.Row{Section: "data path", Op: "fio " + j.name, Unit: "MiB/s",
			RawS: rs, CarveS: cs, Goal: ratioGoal(">=", 0.98)}, nil)
	}
	_, err = e.cmd(ctx, "umount", rawDir)
	e.must(err)
	e.must(e.rawRemove(ctx, raw))
	e.must(v.Down(ctx, carveDir))
	e.must(v.Delete(ctx))
}

// fio runs job for the configured time on a file in dir, direct IO, and
// returns its bandwidth in MiB/s. The file is laid out by the first run
// in dir and reused after; fio does not count the layout.
func (e *env) fio(j fioJob, dir string, fileSize int64) float64 {
	e.t.Helper()
	out, err := e.dataCmd("fio", "--name=bench", "--filename="+filepath.Join(dir, "fio.dat"),
		fmt.Sprintf("--size=%d", fileSize), "--rw="+j.rw, "--bs="+j.bs, "--direct=1",
		"--ioengine=libaio", "--iodepth=16", "--time_based", fmt.Sprintf("--runtime=%d", int(e.cfg.fioRuntime.Seconds())),
		"--output-format=json")
	e.must(err)
	bw, err := fioBandwidth(out)
	e.must(err)
	return bw
}

// fioBandwidth reads the one job's read or write bandwidth, in MiB/s,
// from fio's JSON output.
func fioBandwidth(out []byte) (float64, error) {
	var r struct {
		Jobs []struct {
			Read struct {
				BwBytes float64 `json:"bw_bytes"`
			} `json:"read"`
			Write struct {
				BwBytes float64 `json:"bw_bytes"`
			} `json:"write"`
			Error int `json:"error"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return 0, fmt.Errorf("fio output: %w", err)
	}
	if len(r.Jobs) != 1 || r.Jobs[0].Error != 0 {
		return 0, fmt.Errorf("fio: %d jobs, error %v", len(r.Jobs), r.Jobs)
	}
	bw := r.Jobs[0].Read.BwBytes + r.Jobs[0].Write.BwBytes
	if bw <= 0 {
		return 0, fmt.Errorf("fio moved no data")
	}
	return bw / mib, nil
}
