package lvm

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// A pool's usage is read from its -tpool layer, else from the pool's own
// device when that is the thin-pool target (a pool no thin LV was made
// in); a pool with neither is left out, and a status that cannot be read
// prints its error.
func TestPoolsPrintReadsEachPoolsThinPoolDevice(t *testing.T) {
	devices := map[string]dmTarget{
		"carve--thin-pool0-tpool": {0, 524288, "thin-pool", "5 90/4096 300/4096 - rw discard_passdown queue_if_no_space - 1024"},
		"carve--thin-pool0":       {0, 524288, "linear", ""},
		"carve--thin-fresh":       {0, 524288, "thin-pool", "0 10/4096 0/4096 - rw discard_passdown queue_if_no_space - 1024"},
		"carve--thin-odd":         {0, 524288, "linear", ""},
		"carve--thin-full-tpool":  {0, 524288, "thin-pool", "9 99/4096 4096/4096 - out_of_data_space discard_passdown queue_if_no_space - 1024"},
	}
	var asked []string
	status := func(dm string) ([]dmTarget, error) {
		asked = append(asked, dm)
		if dm == "carve--thin-locked-tpool" {
			return nil, fmt.Errorf("device-mapper status of %s: %w", dm, unix.EACCES)
		}
		if d, ok := devices[dm]; ok {
			return []dmTarget{d}, nil
		}
		return nil, unix.ENXIO
	}
	got := poolsPrint("carve-thin", []string{"fresh", "full", "gone", "locked", "odd", "pool0"}, status)
	want := "fresh=data 0/4096 meta 10/4096 rw;full=data 4096/4096 meta 99/4096 out_of_data_space;" +
		"locked=device-mapper status of carve--thin-locked-tpool: permission denied;pool0=data 300/4096 meta 90/4096 rw;"
	if got != want {
		t.Errorf("print\n %q\nwant\n %q", got, want)
	}
	if slices.Contains(asked, "carve--thin-pool0") {
		t.Errorf("asked for a used pool's own device too: %v", asked)
	}
}

// A VG's print moves with lvm2's device selection as with its metadata;
// only the metadata part fails it; a VG without active pools asks no
// kernel.
func TestVGPrintJoinsItsParts(t *testing.T) {
	pv := realPVFile(t)
	s := printScope{vg: "carve-thin", lvmDir: t.TempDir(), pvs: []string{pv}}
	before, err := vgPrint(s)
	if err != nil {
		if strings.Contains(err.Error(), "invalid argument") {
			t.Skipf("O_DIRECT on %s: %v", pv, err) // as TestMetadataPrintOfAFile
		}
		t.Fatal(err)
	}
	if want := pv + "=12800+2178/1c3e6bd5;||lvm.conf=-;lvmlocal.conf=-;devices/=-;"; before != want {
		t.Errorf("print %q, want %q", before, want)
	}
	if err := os.WriteFile(filepath.Join(s.lvmDir, "lvmlocal.conf"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if after, err := vgPrint(s); err != nil || after == before {
		t.Errorf("after lvmlocal.conf was written: %q, %v", after, err)
	}
	s.pvs = []string{filepath.Join(s.lvmDir, "no-such-pv")}
	if p, err := vgPrint(s); err == nil {
		t.Errorf("a PV that cannot be read printed %q", p)
	}
}

// scopePrints is a VG's print made of what its scope names: each pool's
// usage is what the test sets.
type scopePrints struct {
	mu     sync.Mutex
	usage  map[string]string
	scopes []printScope
}

func (f *scopePrints) read(s printScope) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scopes = append(f.scopes, s)
	p := strings.Join(s.pvs, ",") + "|"
	for _, pool := range s.pools {
		p += pool + "=" + f.usage[pool] + ";"
	}
	return p, nil
}

func (f *scopePrints) setUsage(pool, u string) {
	f.mu.Lock()
	f.usage[pool] = u
	f.mu.Unlock()
}

// The print covers the VG's active thin pools as its last lvs report
// told them: the first generation's base, taken before any report, has
// none; the next comparison finds pool0 and starts the generation that
// covers it, whose reports then stay until pool0 fills.
func TestAPoolsFillEndsTheReports(t *testing.T) {
	x, r, now := newCacheUnderTest(t)
	prints := &scopePrints{usage: map[string]string{"pool0": "data 0/4096"}}
	x.print = prints.read
	x.notePVs("carve-thin", []PV{{Name: "/dev/vdz"}})
	query := func(wantLVs int, why string) {
		t.Helper()
		if _, err := x.ListLVs(ctx, Cached, "carve-thin"); err != nil {
			t.Fatal(err)
		}
		if r.count("lvs") != wantLVs {
			t.Errorf("%s: lvs ran %d times, want %d", why, r.count("lvs"), wantLVs)
		}
		*now = now.Add(printEvery)
	}
	query(1, "the first query")
	if got := prints.scopes[0].pools; len(got) != 0 {
		t.Errorf("the first base print covers pools %v, before any report told of one", got)
	}
	query(2, "pool0, active in the report, enters the print")
	if got := prints.scopes[len(prints.scopes)-1]; !slices.Equal(got.pools, []string{"pool0"}) || got.vg != "carve-thin" {
		t.Errorf("the second generation's base print covers %+v, want pool0 of carve-thin", got)
	}
	query(2, "pool0 unchanged")
	prints.setUsage("pool0", "data 100/4096")
	query(3, "pool0 filled")
	query(3, "pool0 unchanged since")
}
