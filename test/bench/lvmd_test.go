//go:build bench

package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"carve.dev/carve/test/bench/lvmd"
	"carve.dev/carve/test/bench/results"
)

// TopoLVM's lvmd on the bench's VG: its device classes, the VG (thick)
// and the bench's thin pool (thin).
const (
	dcThick = "thick"
	dcThin  = "thin"
)

// lvmdGoal is Carve's target against TopoLVM's lvmd: at least 1.5 times
// as fast, Carve/lvmd <= 0.67.
var lvmdGoal = results.Goal{Of: "lvmd", Op: "<=", Value: 0.67}

// lvmdProc is a running lvmd and its log, from which its lvm2 runs are
// counted: lvmd logs each command it starts ("invoking command") at
// verbosity 1 (changes) or 4 (reports), so it runs with --zap-log-level=4.
type lvmdProc struct {
	c   *lvmd.Client
	log string
}

// startLVMD starts the lvmd binary bin on the bench's VG with its socket
// in a temporary directory and waits until it accepts connections. lvm2
// runs as Carve's does: the same binary, the same private configuration
// (the environment), no nsenter.
func (e *env) startLVMD(bin string) *lvmdProc {
	t := e.t
	dir := t.TempDir()
	sock := filepath.Join(dir, "lvmd.sock")
	lvmBin, err := exec.LookPath("lvm")
	e.must(err)
	cfg := map[string]any{
		"socket-name":        sock,
		"lvm-command-prefix": []string{lvmBin},
		"device-classes": []map[string]any{
			{"name": dcThick, "volume-group": vg, "default": true, "spare-gb": 0},
			{"name": dcThin, "volume-group": vg, "type": "thin", "thin-pool": map[string]any{"name": pool, "overprovision-ratio": 10.0}},
		},
	}
	b, err := json.Marshal(cfg) // YAML is a superset of JSON
	e.must(err)
	cfgPath := filepath.Join(dir, "lvmd.yaml")
	e.must(os.WriteFile(cfgPath, b, 0o644))
	logDir := os.Getenv("CARVE_TEST_LOGS")
	if logDir == "" {
		logDir = dir
	}
	logPath := filepath.Join(logDir, "lvmd.log")
	logf, err := os.Create(logPath)
	e.must(err)
	cmd := exec.Command(bin, "--config", cfgPath, "--metrics-bind-address=", "--zap-log-level=4")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	e.must(cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
		_ = logf.Close()
		t.Logf("lvmd log: %s", logPath)
	})
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if c, err := net.DialTimeout("unix", sock, time.Second); err == nil {
			_ = c.Close()
			break
		}
		select {
		case <-exited:
			t.Fatalf("lvmd exited early (its log: %s)", logPath)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("lvmd did not accept connections on %s within 5 minutes", sock)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c, err := lvmd.Dial(sock)
	e.must(err)
	t.Cleanup(func() { _ = c.Close() })
	free, err := c.GetFreeBytes(context.Background(), dcThick)
	e.must(err)
	t.Logf("lvmd started: %d MiB free in device class %s", free/mib, dcThick)
	return &lvmdProc{c: c, log: logPath}
}

// commands counts the lvm2 commands lvmd starts from now until the
// returned function is called, by subcommand.
func (l *lvmdProc) commands() func() (map[string]float64, error) {
	st, err := os.Stat(l.log)
	off := int64(0)
	if err == nil {
		off = st.Size()
	}
	return func() (map[string]float64, error) {
		f, err := os.Open(l.log)
		if err != nil {
			return nil, err
		}
		defer func() { _ = f.Close() }()
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return nil, err
		}
		runs := map[string]float64{}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line struct {
				Msg  string   `json:"msg"`
				Args []string `json:"args"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "invoking command" && len(line.Args) > 1 {
				runs[line.Args[1]]++ // after the prefix, lvm's path
			}
		}
		return runs, sc.Err()
	}
}

// column is one way to make and remove n volumes at once: raw lvm2,
// Carve or lvmd. count starts counting its commands (nil: not counted);
// its result also gives the seconds spent zeroing (Carve's blkdiscard).
type column struct {
	prefix string
	create func(ctx context.Context, name string, thin bool) (id string, err error)
	remove func(ctx context.Context, id string, thin bool) error
	count  func() func() (runs map[string]float64, wipe float64)
}

// figures are one column's samples of create and delete, and the
// commands of its last sample.
type figures struct {
	create, remove, wipe []float64
	createK, removeK     map[string]float64
}

func (e *env) lvmdColumns(l *lvmdProc) (raw, carve, lv column) {
	raw = column{prefix: "raw",
		create: func(ctx context.Context, name string, thin bool) (string, error) {
			return name, e.rawLV(ctx, name, provisionSize, thin)
		},
		remove: func(ctx context.Context, id string, _ bool) error { return e.rawRemove(ctx, id) }}
	carve = column{prefix: "pvc",
		create: func(ctx context.Context, name string, thin bool) (string, error) {
			v, err := e.create(ctx, name, provisionSize, thin, "")
			if err != nil {
				return "", err
			}
			return v.ID, nil
		},
		remove: func(ctx context.Context, id string, _ bool) error { return e.deleteVolume(ctx, id) },
		count: func() func() (map[string]float64, float64) {
			before := e.scrape()
			return func() (map[string]float64, float64) {
				d := e.scrape().minus(before)
				return d.runs, d.seconds["blkdiscard"]
			}
		}}
	dc := func(thin bool) string {
		if thin {
			return dcThin
		}
		return dcThick
	}
	lv = column{prefix: "lvmd",
		create: func(ctx context.Context, name string, thin bool) (string, error) {
			_, err := l.c.CreateLV(ctx, lvmd.CreateLVRequest{Name: name, DeviceClass: dc(thin), SizeBytes: provisionSize})
			return name, err
		},
		remove: func(ctx context.Context, id string, thin bool) error {
			return l.c.RemoveLV(ctx, lvmd.RemoveLVRequest{Name: id, DeviceClass: dc(thin)})
		},
		count: func() func() (map[string]float64, float64) {
			end := l.commands()
			return func() (map[string]float64, float64) {
				runs, err := end()
				e.must(err)
				return runs, 0
			}
		}}
	return raw, carve, lv
}

// sample makes n volumes of col at once, timed, then removes them at
// once, timed, and adds both to f.
func (e *env) sample(col column, f *figures, n int, thin bool) {
	ctx := context.Background()
	ids := make([]string, n)
	var end func() (map[string]float64, float64)
	if col.count != nil {
		end = col.count()
	}
	var next sync.Mutex // ids[i] written by one goroutine each
	i := -1
	f.create = append(f.create, e.timed(func() error {
		return batch(n, func() error {
			next.Lock()
			i++
			k := i
			next.Unlock()
			id, err := col.create(ctx, e.name(col.prefix), thin)
			ids[k] = id
			return err
		})
	}))
	if end != nil {
		f.createK, _ = end()
		end = col.count()
	}
	f.remove = append(f.remove, e.timed(func() error {
		var errs []error
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Go(func() {
				if err := col.remove(ctx, id, thin); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	}))
	if end != nil {
		var wipe float64
		f.removeK, wipe = end()
		f.wipe = append(f.wipe, wipe)
	}
}

// lvmdSection compares Carve with TopoLVM's lvmd (and raw lvm2) on the
// same VG: create and delete of 256 MiB volumes, thick and thin, one at a
// time and cfg.parallel at once, and a thin snapshot; raw, Carve and lvmd
// take turns.
func (e *env) lvmdSection() {
	bin := os.Getenv("CARVE_BENCH_LVMD")
	if bin == "" {
		e.t.Skip("CARVE_BENCH_LVMD is not set: no lvmd to compare with (scripts/bench.sh builds one from CARVE_BENCH_TOPOLVM_SRC)")
	}
	l := e.startLVMD(bin)
	raw, carve, lv := e.lvmdColumns(l)
	for _, par := range []bool{false, true} {
		for _, thin := range []bool{false, true} {
			n, reps, how := 1, e.cfg.reps, "serial"
			if par {
				n, reps, how = e.cfg.parallel, e.cfg.parReps, fmt.Sprintf("%d parallel", e.cfg.parallel)
			}
			var r, c, m figures
			e.turns(reps, func() { e.sample(raw, &r, n, thin) }, func() { e.sample(carve, &c, n, thin) },
				func() { e.sample(lv, &m, n, thin) })
			createGoal := lvmdGoal
			var removeGoal results.Goal
			if !thin && !par {
				removeGoal = lvmdGoal
			}
			e.addLVMD(results.Row{Op: fmt.Sprintf("%s create, %s", kind(thin), how), RawS: r.create, CarveS: c.create,
				LVMDS: m.create, Commands: c.createK, LVMDCommands: m.createK, Goal: createGoal})
			row := results.Row{Op: fmt.Sprintf("%s delete, %s", kind(thin), how), RawS: r.remove, CarveS: c.remove,
				LVMDS: m.remove, Commands: c.removeK, LVMDCommands: m.removeK, Goal: removeGoal}
			if !thin {
				row.WipeS = c.wipe
				row.Note = "Carve zeroes a thick volume before removing it (wipe); lvmd does not"
			}
			e.addLVMD(row)
		}
	}
	e.lvmdSnapshot(l)
}

// lvmdSnapshot compares a thin snapshot: lvcreate -s, CreateSnapshot, and
// CreateLVSnapshot as TopoLVM's controller asks for it (read-only, the
// source's size).
func (e *env) lvmdSnapshot(l *lvmdProc) {
	ctx := context.Background()
	rawOrigin := e.name("raw")
	e.must(e.rawLV(ctx, rawOrigin, provisionSize, true))
	origin, err := e.create(ctx, e.name("pvc"), provisionSize, true, "")
	e.must(err)
	lvOrigin := e.name("lvmd")
	_, err = l.c.CreateLV(ctx, lvmd.CreateLVRequest{Name: lvOrigin, DeviceClass: dcThin, SizeBytes: provisionSize})
	e.must(err)
	var k cmdsPerOp
	var lk map[string]float64
	var r, c, m []float64
	e.turns(e.cfg.reps, func() {
		snap := e.name("raw-snap")
		r = append(r, e.timed(func() error { return e.lvmCmd(ctx, "lvcreate", "-s", "-n", snap, vg+"/"+rawOrigin) }))
		e.must(e.rawRemove(ctx, snap))
	}, func() {
		var id string
		c = append(c, e.carveTimed(&k, func() error {
			s, err := e.snapshot(ctx, e.name("snap"), origin.ID, 0)
			id = s.GetSnapshotId()
			return err
		}))
		e.must(e.deleteSnapshot(ctx, id))
	}, func() {
		snap := e.name("lvmd-snap")
		end := l.commands()
		m = append(m, e.timed(func() error {
			_, err := l.c.CreateLVSnapshot(ctx, lvmd.CreateLVSnapshotRequest{Name: snap, DeviceClass: dcThin, SourceVolume: lvOrigin, AccessType: "ro"})
			return err
		}))
		var err error
		lk, err = end()
		e.must(err)
		e.must(l.c.RemoveLV(ctx, lvmd.RemoveLVRequest{Name: snap, DeviceClass: dcThin}))
	})
	e.addLVMD(results.Row{Op: "thin snapshot (CreateSnapshot, CreateLVSnapshot ro, lvcreate -s)", RawS: r, CarveS: c, LVMDS: m,
		Commands: k.last.runs, LVMDCommands: lk})
	e.must(e.rawRemove(ctx, rawOrigin))
	e.must(origin.Delete(ctx))
	e.must(l.c.RemoveLV(ctx, lvmd.RemoveLVRequest{Name: lvOrigin, DeviceClass: dcThin}))
}

// addLVMD completes a row of the lvmd section with its medians and
// records it.
func (e *env) addLVMD(row results.Row) {
	row.Section, row.Unit = "lvmd", "s"
	e.add(row, nil)
	last := e.res.Rows[len(e.res.Rows)-1]
	e.t.Logf("%-60s lvmd %8.3f s  carve/lvmd %.2f  lvmd's commands %s", "", last.LVMD, last.LVMDRatio(), describe(last.LVMDCommands))
}
