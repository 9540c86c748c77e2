package lvmvol

import (
	"context"
	"fmt"
)

// lockActivation serialises the calls that decide a volume's activation
// from what they read of it: PublishVolume, UnpublishVolume, and a copy's
// hold and release. Each reads the LV, then activates, deactivates or
// moves the held mark; interleaved, one acts on a report the other has
// just made false. The case that wedged a volume: a snapshot's copy ends
// and its release reads the volume held, a publish drops the mark and
// finds the volume active already, then the release deactivates it. The
// CO counts it attached and its NodeStageVolume fails for good
// (FAILED_PRECONDITION, not published).
//
// The key is the LV: the CO serialises calls per volume, but a copy runs
// in a job of its own (jobs.go), outside any call. The lock is held over
// lvm2 runs only, never while waiting for a job.
func (m *Manager) lockActivation(ctx context.Context, vg, name string) (unlock func(), err error) {
	unlock, err = m.activations.Lock(ctx, vg+"/"+name)
	if err != nil {
		return nil, fmt.Errorf("wait for the activation of %s/%s to settle: %w", vg, name, err)
	}
	return unlock, nil
}
