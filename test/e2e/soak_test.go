//go:build e2e

package e2e

import (
	"os"
	"testing"
	"time"

	"carve.dev/carve/test/soakmodel"
)

// The soak in cluster mode: chaos under load on real Kubernetes
// components, on both VM nodes. For CARVE_E2E_SOAK_DURATION, a seeded
// random mix of what users do through Kubernetes objects (claims of every
// layout the VM nodes can carve: thick, thin, striped and raid1, each on
// one of the two, where its writers are pinned; writer pods started and
// deleted, so volumes are attached, staged, published and torn down;
// claims deleted; VolumeSnapshots; restores, on the snapshot's node or on
// the other, whose carve node receives the snapshot's data over mutual
// TLS; online expansions; VolumeMoves of a claim, idle or with its writer
// running, to the other node, as the runbook has it: at ReadyToCutOver
// the writer is deleted, and once Moved the claim, under its name, is on
// a new PV there) runs a few at a time, while the carve containers of
// carve controller (host node, which runs the move controller) and carve
// node (either VM node, or both) are SIGKILLed at random moments, in the
// middle of whatever the sidecars, kubelet, a transfer or a move are
// doing.
//
// Every operation has a wanted state (a pod Running, a PV gone, a
// VolumeSnapshot ready, a VolumeMove Moved...) and a deadline
// (CARVE_E2E_SOAK_DEADLINE): one short of it past its deadline fails the
// soak, as does a carve pod not ready again within it after a kill, and
// a VolumeMove that ends Failed (with its message and the kills made
// during it: Failed is final, and the controller and carve node resume
// after a kill). The writer pods write files and acknowledge each one
// after fsync (soakwrites.go); every acknowledged write must read back
// with its checksum whenever the volume is mounted again, on its node or,
// after a move, on the other; a restore, on either node, must hold every
// write acknowledged before its snapshot was asked for. A moved claim's
// old LV and the move's snapshots must be gone. While no operation is in
// flight, every CARVE_E2E_SOAK_CHECK_EVERY and at the end,
// soakcheck_test.go checks that the Kubernetes objects, Carve's resources
// (each on its volume's node), the LVs (names, sizes, layouts,
// activation), the mounts and the capacity (the VG's free space against
// the model, NodeStorage against lvm2's own report) of each VM node are
// exactly what the model's part on that node says. At the end every
// volume is brought up and read, everything is deleted, nothing may be
// left, and the capacity carve reports of each VM node (NodeStorage, and
// csi-provisioner's CSIStorageCapacity of every class) must match its
// VG's real free space. The host node's small VG keeps the soak's claims
// off it, as before.
//
// The seed (CARVE_E2E_SOAK_SEED, printed) repeats the choices; which
// operation ends first, and so the interleaving, follows timing.
//
// The model, the verdicts, the figures and the choices are
// test/soakmodel's, shared with test/soak; these files are its Kubernetes
// driver: the objects made and deleted (soakchoose.go: which may be
// chosen now), the kills of containers, and the reads of the cluster,
// each VM node's LVM and mounts, and the writers' logs.
func TestClusterSoak(t *testing.T) {
	fullRunOnly(t)
	cfg := readSoakConfig(t)
	if cfg.Duration == 0 {
		t.Skip("CARVE_E2E_SOAK_DURATION=0")
	}
	s := newClusterSoak(t, cfg)
	t.Cleanup(s.cleanUp)
	t.Logf("cluster soak: seed %d (CARVE_E2E_SOAK_SEED=%d repeats its choices), %s of chaos, up to %d operations at a time, a kill every %s on average, checks every %s, deadline %s",
		cfg.Seed, cfg.Seed, cfg.Duration, soakInFlight, cfg.KillEvery, cfg.CheckEvery, cfg.Deadline)
	s.setUp()
	s.chaos()
	s.finish()
	t.Log(s.stats.Report("cluster soak", cfg, time.Since(s.began), ""))
	t.Log(s.stats.Summary("cluster soak", cfg, time.Since(s.began)))
}

// soakDefaultDuration is what make e2e, and so CI, runs; make soak-cluster
// runs longer.
const soakDefaultDuration = 90 * time.Second

func readSoakConfig(t *testing.T) soakmodel.Config {
	t.Helper()
	c, err := soakmodel.ReadConfig(os.Getenv, "CARVE_E2E_SOAK_", "CARVE_E2E_SOAK_DEADLINE", soakmodel.Config{Duration: soakDefaultDuration,
		KillEvery: 20 * time.Second, CheckEvery: time.Minute, Deadline: hangGuard(4 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// chaos runs random operations and kills until the duration is over, then
// lets the operations in flight end. Before each periodic check it starts
// nothing new until the ones in flight have ended: the check needs a
// cluster at rest.
func (s *clusterSoak) chaos() {
	end := time.Now().Add(s.cfg.Duration)
	nextKill := time.Now().Add(s.cfg.KillDelay(s.rng))
	nextCheck := time.Now().Add(s.cfg.CheckEvery)
	for time.Now().Before(end) {
		s.advance()
		if time.Now().After(nextKill) {
			s.kill()
			nextKill = time.Now().Add(s.cfg.KillDelay(s.rng))
		}
		if time.Now().After(nextCheck) {
			if len(s.ops) == 0 {
				s.check("periodic")
				nextCheck = time.Now().Add(s.cfg.CheckEvery)
			}
		} else {
			s.startSome()
		}
		time.Sleep(time.Second)
	}
	s.logf("chaos over; waiting for the %d operations in flight", len(s.ops))
	s.drain()
}

// drain waits until every operation in flight has reached its wanted
// state (or failed the test past its deadline).
func (s *clusterSoak) drain() {
	for len(s.ops) > 0 {
		time.Sleep(time.Second)
		s.advance()
	}
}

// finish brings every volume up and reads it, checks everything, deletes
// everything, and checks that nothing is left and the capacity is whole.
func (s *clusterSoak) finish() {
	for _, c := range s.model.Volumes {
		if c.pod == nil {
			s.startPod(c)
		}
	}
	s.drain()
	s.check("final")
	for _, c := range s.model.Volumes {
		s.deleteClaim(c)
	}
	for _, sn := range s.model.Snapshots {
		s.deleteSnapshot(sn)
	}
	s.drain()
	s.checkEnd()
}
