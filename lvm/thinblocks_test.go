package lvm

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// thinBlocksReport is lvs -a of the fixtures' VG (thin-*.xml): pool of
// 64 KiB chunks, o (device 1), its snapshots a (2) and b (3), thick LV
// lin, thin LV q of another pool, and e, a thin LV with an external
// origin (lin).
const thinBlocksReport = `{"report":[{"lv":[
  {"lv_name":"a","pool_lv":"pool","thin_id":"2","lv_dm_path":"/dev/mapper/vg-a","lv_size":"67108864","chunk_size":"0","metadata_lv":"","origin":"o"},
  {"lv_name":"b","pool_lv":"pool","thin_id":"3","lv_dm_path":"/dev/mapper/vg-b","lv_size":"67108864","chunk_size":"0","metadata_lv":"","origin":"o"},
  {"lv_name":"e","pool_lv":"pool","thin_id":"4","lv_dm_path":"/dev/mapper/vg-e","lv_size":"67108864","chunk_size":"0","metadata_lv":"","origin":"lin"},
  {"lv_name":"lin","pool_lv":"","thin_id":"","lv_dm_path":"/dev/mapper/vg-lin","lv_size":"67108864","chunk_size":"0","metadata_lv":"","origin":""},
  {"lv_name":"[lvol0_pmspare]","pool_lv":"","thin_id":"","lv_dm_path":"/dev/mapper/vg-lvol0_pmspare","lv_size":"4194304","chunk_size":"0","metadata_lv":"","origin":""},
  {"lv_name":"o","pool_lv":"pool","thin_id":"1","lv_dm_path":"/dev/mapper/vg-o","lv_size":"67108864","chunk_size":"0","metadata_lv":"","origin":""},
  {"lv_name":"pool","pool_lv":"","thin_id":"","lv_dm_path":"/dev/mapper/vg-pool","lv_size":"268435456","chunk_size":"65536","metadata_lv":"[pool_tmeta]","origin":""},
  {"lv_name":"[pool_tdata]","pool_lv":"","thin_id":"","lv_dm_path":"/dev/mapper/vg-pool_tdata","lv_size":"268435456","chunk_size":"0","metadata_lv":"","origin":""},
  {"lv_name":"[pool_tmeta]","pool_lv":"","thin_id":"","lv_dm_path":"/dev/mapper/vg-pool_tmeta","lv_size":"4194304","chunk_size":"0","metadata_lv":"","origin":""},
  {"lv_name":"q","pool_lv":"pool2","thin_id":"1","lv_dm_path":"/dev/mapper/vg-q","lv_size":"67108864","chunk_size":"0","metadata_lv":"","origin":""}
]}]}`

func thinBlocksSteps(dir, held string) []step {
	return []step{
		lockingDirStep(dir),
		{args: append(append([]string{"lvs", "--readonly", "-a"}, reportArgs(thinBlocksFields)...), "vg"), out: thinBlocksReport},
		{args: []string{"dmsetup", "status", "vg-pool-tpool"},
			out: "0 524288 thin-pool 3 113/1024 8/4096 " + held + " rw discard_passdown queue_if_no_space - 256 \n"},
	}
}

func snapMessage(msg string) []string {
	return []string{"dmsetup", "message", "vg-pool-tpool", "0", msg}
}

var dumpArgs = []string{"thin_dump", "--metadata-snap", "--dev-id", "2", "/dev/mapper/vg-pool_tmeta"}

func TestThinAllocated(t *testing.T) {
	c := newFake(t, stepsOf(thinBlocksSteps(t.TempDir(), "-"),
		step{args: snapMessage("reserve_metadata_snap")},
		step{args: dumpArgs, out: string(fixture(t, "thin-dump-dev2.xml"))},
		step{args: snapMessage("release_metadata_snap")})...)
	var got []Range
	err := c.ThinAllocated(ctx, "vg", "a", 0, func(r Range) error { got = append(got, r); return nil })
	if err != nil || !slices.Equal(got, chunks(0, 2, 6, 1, 10, 1)) {
		t.Fatalf("got %v, %v", got, err)
	}
}

func TestThinDelta(t *testing.T) {
	c := newFake(t, stepsOf(thinBlocksSteps(t.TempDir(), "-"),
		step{args: snapMessage("reserve_metadata_snap")},
		step{args: []string{"thin_delta", "--metadata-snap", "--snap1", "2", "--snap2", "3", "/dev/mapper/vg-pool_tmeta"},
			out: string(fixture(t, "thin-delta-2-3.xml"))},
		step{args: snapMessage("release_metadata_snap")})...)
	var got []Range
	err := c.ThinDelta(ctx, "vg", "a", "b", 100*kib, func(r Range) error { got = append(got, r); return nil })
	if err != nil || !slices.Equal(got, chunks(1, 1, 20, 3)) {
		t.Fatalf("got %v, %v", got, err)
	}
}

// A metadata snapshot left reserved (carve killed during a read) is
// released before the reserve; one the reserve finds (taken meanwhile)
// too.
func TestThinAllocatedReleasesALeftover(t *testing.T) {
	busy := "device-mapper: message ioctl on vg-pool-tpool  failed: Device or resource busy\nCommand failed.\n"
	for name, steps := range map[string][]step{
		"status": stepsOf(thinBlocksSteps(t.TempDir(), "58"),
			step{args: snapMessage("release_metadata_snap")},
			step{args: snapMessage("reserve_metadata_snap")}),
		"reserve": stepsOf(thinBlocksSteps(t.TempDir(), "-"),
			step{args: snapMessage("reserve_metadata_snap"), stderr: busy},
			step{args: snapMessage("release_metadata_snap")},
			step{args: snapMessage("reserve_metadata_snap")}),
	} {
		t.Run(name, func(t *testing.T) {
			c := newFake(t, stepsOf(steps,
				step{args: dumpArgs, out: string(fixture(t, "thin-dump-dev2.xml"))},
				step{args: snapMessage("release_metadata_snap")})...)
			if err := c.ThinAllocated(ctx, "vg", "a", 0, func(Range) error { return nil }); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The snapshot is released whatever ends the read: the callback's error,
// the tool's failure, a cancelled context.
func TestThinAllocatedAlwaysReleases(t *testing.T) {
	stop := errors.New("client gone")
	// "cancelled" cancels the context the cases share: it runs last (a
	// map's order let it run first, and the others then failed waiting
	// for the VG's read lock with a cancelled context).
	cctx, cancel := context.WithCancel(ctx)
	for _, tc := range []struct {
		name string
		tool step
		each func(Range) error
		want error
	}{
		{"callback", step{args: dumpArgs, out: string(fixture(t, "thin-dump-dev2.xml"))},
			func(Range) error { return stop }, stop},
		{"tool", step{args: dumpArgs, stderr: "no current metadata snap\n"}, func(Range) error { return nil }, nil},
		{"cancelled", step{args: dumpArgs, out: string(fixture(t, "thin-dump-dev2.xml"))},
			func(Range) error { cancel(); return cctx.Err() }, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newFake(t, stepsOf(thinBlocksSteps(t.TempDir(), "-"),
				step{args: snapMessage("reserve_metadata_snap")}, tc.tool,
				step{args: snapMessage("release_metadata_snap")})...)
			err := c.ThinAllocated(cctx, "vg", "a", 0, tc.each)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

// LVs that are not thin LVs of one pool, or whose blocks the pool does
// not fully map, are refused before any reserve.
func TestThinBlocksRefuses(t *testing.T) {
	for _, tc := range []struct {
		base, target string
		want         error
	}{
		{"a", "lin", ErrInvalidArgument},
		{"a", "q", ErrInvalidArgument},
		{"a", "e", ErrInvalidArgument},
		{"a", "gone", ErrNotFound},
	} {
		c := newFake(t, stepsOf(thinBlocksSteps(t.TempDir(), "-")[:2])...)
		err := c.ThinDelta(ctx, "vg", tc.base, tc.target, 0, func(Range) error { return nil })
		if !errors.Is(err, tc.want) {
			t.Errorf("ThinDelta(%s, %s) = %v, want %v", tc.base, tc.target, err, tc.want)
		}
	}
	c := newFake(t)
	if err := c.ThinAllocated(ctx, "vg", "-bad", 0, nil); !errors.Is(err, ErrInvalidName) {
		t.Errorf("bad name: %v", err)
	}
}

// At start, the metadata snapshots held by the VG's pools are released,
// and nothing else: another VG's pool, a pool holding none, a failed
// pool, and a thin LV's own device are left alone.
func TestReleaseMetadataSnaps(t *testing.T) {
	status := "other-pool-tpool: 0 524288 thin-pool 3 113/1024 8/4096 58 rw discard_passdown queue_if_no_space - 256\n" +
		"vg-pool-tpool: 0 524288 thin-pool 3 113/1024 8/4096 58 rw discard_passdown queue_if_no_space - 256\n" +
		"vg-idle: 0 524288 thin-pool 3 113/1024 8/4096 - rw discard_passdown queue_if_no_space - 256\n" +
		"vg-broken: 0 524288 thin-pool Fail\n"
	c := newFake(t,
		step{args: []string{"dmsetup", "status", "--target", "thin-pool"}, out: status},
		step{args: snapMessage("release_metadata_snap")})
	got, err := c.ReleaseMetadataSnaps(ctx, "vg")
	if err != nil || !slices.Equal(got, []string{"pool"}) {
		t.Fatalf("released %v, %v; want pool", got, err)
	}
	c = newFake(t, step{args: []string{"dmsetup", "status", "--target", "thin-pool"}, out: "No devices found\n"})
	if got, err := c.ReleaseMetadataSnaps(ctx, "vg"); err != nil || len(got) != 0 {
		t.Fatalf("no pools: %v, %v", got, err)
	}
	if _, err := c.ReleaseMetadataSnaps(ctx, "../vg"); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("invalid VG name: %v", err)
	}
}
