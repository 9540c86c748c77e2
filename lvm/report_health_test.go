package lvm

import (
	"testing"
	"time"
)

func TestParseThinPoolHealth(t *testing.T) {
	pool := parseLVFixture(t, "thinops-lv-pool0")["pool0"]
	if !pool.Active || pool.WhenFull != "queue" || pool.MetadataSize != 4*mib || pool.MetadataPercent != 11.23 ||
		pool.DataPercent != 25 || pool.CheckNeeded || pool.Health != "" || !pool.HasTag("carve.dev/pool=p0") {
		t.Errorf("pool0 = %+v", pool)
	}
	if free := pool.ThinPoolFree(); free != 48*mib {
		t.Errorf("ThinPoolFree = %d, want %d", free, 48*mib)
	}
	// Inactive: lvm2 reports no usage, so the free space is unknown.
	idle := parseLVFixture(t, "thinops-lv-pool0-inactive")["pool0"]
	if idle.Active || idle.DataPercent != 0 || idle.WhenFull != "queue" || idle.ThinPoolFree() != 0 {
		t.Errorf("inactive pool0 = %+v, free %d", idle, idle.ThinPoolFree())
	}
}

func TestParseThinOps(t *testing.T) {
	lvs := parseLVFixture(t, "thinops-lvs")
	// The origin thin1 was removed: snap1 is a thin LV of its own now.
	snap := lvs["snap1"]
	if !snap.IsThinVolume() || snap.Origin != "" || snap.PoolLV != "pool0" || snap.Role != "public" ||
		!snap.Active || snap.SkipActivation || snap.DataPercent != 50 || !snap.HasTag("carve.dev/snapshot=s1") {
		t.Errorf("snap1 = %+v", snap)
	}
	if thin2 := lvs["thin2"]; thin2.Size != 48*mib || thin2.ThinPoolFree() != 0 {
		t.Errorf("extended thin2 = %+v", thin2)
	}
	if len(lvs) != 3 {
		t.Errorf("got %d LVs, want pool0, snap1, thin2", len(lvs))
	}
}

func TestParseRAIDSync(t *testing.T) {
	synced := parseLVFixture(t, "raid1-lvs")["mirror1"]
	if synced.SyncAction != "idle" || synced.SyncPercent != 100 || synced.MismatchCount != 0 {
		t.Errorf("mirror1 = %+v", synced)
	}
	syncing := parseLVFixture(t, "raid1-syncing-lv")["mirror2"]
	if syncing.SyncAction != "resync" || syncing.SyncPercent >= 100 || syncing.SyncPercent <= 0 || syncing.Size != 1<<30 {
		t.Errorf("mirror2 = %+v", syncing)
	}
}

// An LV with two segments is one row: lvFields has no segment fields.
func TestParseStripedOneRowPerLV(t *testing.T) {
	lvs, err := parseLVs(fixture(t, "striped-lvs.json"))
	if err != nil || len(lvs) != 2 {
		t.Fatalf("striped-lvs = %d rows, %v", len(lvs), err)
	}
	for _, lv := range lvs {
		if lv.Layout != "striped" || lv.Size != 16*mib {
			t.Errorf("%s = %+v", lv.Name, lv)
		}
	}
}

func TestParseCreationTime(t *testing.T) {
	lv := parseLVFixture(t, "thin-lvs")["thin1"]
	if lv.CreationTime.IsZero() || lv.CreationTime.Location() != time.UTC || lv.CreationTime.Year() < 2020 {
		t.Errorf("CreationTime = %v", lv.CreationTime)
	}
	for in, ok := range map[string]bool{`""`: true, `"1700000000"`: true, `"2024-01-01 00:00:00 +0000"`: false, `"x"`: false} {
		_, err := parseLVs([]byte(`{"report":[{"lv":[{"lv_name":"x","lv_time":` + in + `}]}]}`))
		if (err == nil) != ok {
			t.Errorf("lv_time %s: err = %v", in, err)
		}
	}
}

func TestThinPoolFree(t *testing.T) {
	pool := func(size uint64, pct float64, active bool) LV {
		return LV{Attr: "twi-aotz--", Size: size, DataPercent: pct, Active: active}
	}
	for _, tc := range []struct {
		lv   LV
		want uint64
	}{
		{pool(64*mib, 0, true), 64 * mib},
		{pool(64*mib, 100, true), 0},
		{pool(100, 12.34, true), 87}, // used rounded up: never more free than known
		{pool(3, 33.33, true), 2},
		{pool(64*mib, 10, false), 0},
		{LV{Attr: "Vwi-a-tz--", Size: 64 * mib, Active: true}, 0},
	} {
		if got := tc.lv.ThinPoolFree(); got != tc.want {
			t.Errorf("ThinPoolFree(%+v) = %d, want %d", tc.lv, got, tc.want)
		}
	}
}
