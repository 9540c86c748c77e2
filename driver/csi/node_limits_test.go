package csi

import (
	"context"
	"path/filepath"
	"testing"

	"carve.dev/carve/driver/volume"
)

// TestLimitPublishReadsNoFreshReport: NodePublishVolume reads the volume's
// IO limits from a cached report (the one NodeStageVolume read, as a rule),
// never by an lvs of its own. The benchmark's node path found NodeStage
// and NodePublish running two lvs where one was meant: the second was this
// read, one more lvm2 run for every pod start.
func TestLimitPublishReadsNoFreshReport(t *testing.T) {
	e := newNodeEnv(t)
	id, err := volume.ParseID(volID("vg0", "pvc-a"))
	if err != nil {
		t.Fatal(err)
	}
	e.lvm.fresh = nil
	if err := e.n.limitPublish(context.Background(), id, 0, filepath.Join(e.root, "target")); err != nil {
		t.Fatalf("limitPublish of a volume without limits: %v", err)
	}
	if len(e.lvm.fresh) != 0 {
		t.Errorf("limitPublish read %v afresh; want its facts from a cached report", e.lvm.fresh)
	}
}
