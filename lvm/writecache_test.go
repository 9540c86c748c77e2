package lvm

import (
	"errors"
	"reflect"
	"testing"
)

func TestCacheVolArgs(t *testing.T) {
	got, err := cacheVolArgs("vg0", "pvc-1_wcache", 10*mib, 4*mib, []string{"@fast", "/dev/nvme1n1"}, []string{"carve.dev/cache-of=pvc-1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"lvcreate", "--yes", "-an", "-Zn", "-n", "pvc-1_wcache", "-L", "12582912b",
		"--addtag", "carve.dev/cache-of=pvc-1", "vg0", "@fast", "/dev/nvme1n1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("args\n got %q\nwant %q", got, want)
	}
	for _, bad := range []struct {
		name string
		size uint64
		refs []string
		tags []string
	}{
		{"pvc-1_cvol", 4 * mib, []string{"@fast"}, nil},       // reserved
		{"pvc-1_wcache", 0, []string{"@fast"}, nil},           // no size
		{"pvc-1_wcache", 4 * mib, nil, nil},                   // nowhere
		{"pvc-1_wcache", 4 * mib, []string{"fast"}, nil},      // neither path nor tag
		{"pvc-1_wcache", 4 * mib, []string{"@"}, nil},         // empty tag
		{"pvc-1_wcache", 4 * mib, []string{"@-x"}, nil},       // option-like
		{"pvc-1_wcache", 4 * mib, []string{"/dev/../x"}, nil}, // not a plain path
		{"pvc-1_wcache", 4 * mib, []string{"@fast"}, []string{"bad tag"}},
	} {
		if _, err := cacheVolArgs("vg0", bad.name, bad.size, 4*mib, bad.refs, bad.tags); err == nil {
			t.Errorf("cacheVolArgs(%q, %d, %q, %q) succeeded", bad.name, bad.size, bad.refs, bad.tags)
		} else if !errors.Is(err, ErrInvalidArgument) && !errors.Is(err, ErrInvalidName) {
			t.Errorf("cacheVolArgs(%q, %q): %v, want an invalid argument or name", bad.name, bad.refs, err)
		}
	}
}

// The rows lvm2 2.03.16 reports for an LV with a write cache (lvs -a).
func TestAttachedCacheVol(t *testing.T) {
	all := []LV{
		{Name: "pvc-1", Layout: "writecache", CacheVol: "pvc-1_wcache", Size: 64 * mib},
		{Name: "pvc-1_wcache_cvol", Hidden: true, Layout: "writecache,cachevol", Size: 16 * mib, Tags: []string{"t"}},
		{Name: "pvc-1_wcorig", Hidden: true, Layout: "linear", Size: 64 * mib},
		{Name: "pvc-2", Layout: "linear", Size: 64 * mib},
	}
	if !all[0].HasWriteCache() || all[3].HasWriteCache() {
		t.Error("HasWriteCache wrong")
	}
	if cv, ok := AttachedCacheVol(all, "pvc-1"); !ok || cv.Size != 16*mib || !cv.HasTag("t") {
		t.Errorf("AttachedCacheVol(pvc-1) = %+v, %v", cv, ok)
	}
	for _, name := range []string{"pvc-2", "pvc-3"} {
		if cv, ok := AttachedCacheVol(all, name); ok {
			t.Errorf("AttachedCacheVol(%s) = %+v", name, cv)
		}
	}
}

// lvm2 reports the cachevol as the LV's pool_lv: it must not read as a
// thin LV's pool (Carve skips the wipe of thin LVs, among others).
func TestCacheVolIsNoThinPool(t *testing.T) {
	out := []byte(`{"report":[{"lv":[
		{"lv_name":"pvc-1", "vg_name":"vg", "lv_attr":"Cwi-aoC---", "lv_layout":"writecache", "pool_lv":"[pvc-1_wcache_cvol]", "lv_size":"67108864"},
		{"lv_name":"[pvc-1_wcache_cvol]", "vg_name":"vg", "lv_attr":"Cwi-aoC---", "lv_layout":"writecache,cachevol", "pool_lv":"", "lv_size":"16777216"},
		{"lv_name":"thin1", "vg_name":"vg", "lv_attr":"Vwi-a-tz--", "lv_layout":"thin,sparse", "pool_lv":"pool", "lv_size":"16777216"}]}]}`)
	lvs, err := parseLVs(out)
	if err != nil {
		t.Fatal(err)
	}
	if lvs[0].PoolLV != "" || lvs[0].CacheVol != "pvc-1_wcache" || !lvs[0].HasWriteCache() {
		t.Errorf("cached LV: pool %q, cachevol %q", lvs[0].PoolLV, lvs[0].CacheVol)
	}
	if cv, ok := AttachedCacheVol(lvs, "pvc-1"); !ok || cv.Size != 16*mib {
		t.Errorf("AttachedCacheVol = %+v, %v", cv, ok)
	}
	if lvs[2].PoolLV != "pool" || lvs[2].HasWriteCache() {
		t.Errorf("thin LV: pool %q", lvs[2].PoolLV)
	}
}
