package lvmvol_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/lvm"
)

// reportRunner answers every lvs with one report of n Carve volumes, as
// lvm2 would, and refuses everything else.
type reportRunner struct{ report []byte }

func (r reportRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	if name == "lvm" && len(args) > 0 && args[0] == "lvs" {
		return r.report, nil
	}
	return nil, fmt.Errorf("unexpected command %s %v", name, args)
}

// volumesReport is an lvs report of n settled thick volumes of VG vg0.
func volumesReport(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"report":[{"lv":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		name := fmt.Sprintf("pvc-%04d", i)
		fmt.Fprintf(&b, `{"lv_name":%q,"vg_name":"vg0","lv_uuid":"uuid-%d","lv_path":"/dev/vg0/%s","lv_dm_path":"/dev/mapper/vg0-%s",`+
			`"lv_size":"4194304","lv_attr":"-wi-------","lv_tags":"carve.dev/volume,carve.dev/params=0a87b7a1e85e435d,carve.dev/name=%s",`+
			`"lv_layout":"linear","lv_role":"public","lv_active":"","lv_device_open":"","pool_lv":"","origin":"","data_percent":"",`+
			`"metadata_percent":"","lv_health_status":"","copy_percent":"","vg_extent_size":"4194304","vg_missing_pv_count":"0",`+
			`"raid_sync_action":"","raid_mismatch_count":"","lv_when_full":"","lv_metadata_size":"","lv_check_needed":"",`+
			`"lv_time":"1795761592","lv_kernel_major":"-1","lv_kernel_minor":"-1"}`, name, i, name, name, name)
	}
	b.WriteString(`]}]}`)
	return []byte(b.String())
}

// BenchmarkListVolumes1000Cached is Carve's cost of a query's
// ListVolumes at 1000 volumes over lvm.Cache, the path the scale
// benchmark times in the VM (65 ms a page there): the report is cached,
// so this is building the volumes from it.
func BenchmarkListVolumes1000Cached(b *testing.B) {
	c := lvm.NewCache(lvm.New(reportRunner{volumesReport(1000)}), time.Hour)
	m := lvmvol.NewManager(lvmvol.Config{LVM: c, Cache: c, Wiper: nil, Node: node, VolumeGroups: []string{vg}})
	ctx := context.Background()
	vols, err := m.ListVolumes(ctx, lvm.Cached)
	if err != nil || len(vols) != 1000 {
		b.Fatalf("%d volumes, %v", len(vols), err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.ListVolumes(ctx, lvm.Cached); err != nil {
			b.Fatal(err)
		}
	}
}
