//go:build e2e

package e2e

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// The soak in cluster mode: chaos under load on real Kubernetes
// components. For CARVE_E2E_SOAK_DURATION, a seeded random mix of what
// users do through Kubernetes objects (claims of every layout the VM node
// can carve: thick, thin, striped and raid1; writer pods started and
// deleted, so volumes are attached, staged, published and torn down;
// claims deleted; VolumeSnapshots; restores; online expansions) runs a few
// at a time, while the carve containers of carve controller (host node)
// and carve node (VM node) are SIGKILLed at random moments, in the middle
// of whatever the sidecars and kubelet are asking of them.
//
// Every operation has a wanted state (a pod Running, a PV gone, a
// VolumeSnapshot ready...) and a deadline (CARVE_E2E_SOAK_DEADLINE): one
// short of it past its deadline fails the soak, as does a carve pod not
// ready again within it after a kill. The writer pods write files and
// acknowledge each one after fsync (soakwrites.go); every acknowledged
// write must read back with its checksum whenever the volume is mounted
// again, and a restore must hold every write acknowledged before its
// snapshot was asked for. While no operation is in flight, every
// CARVE_E2E_SOAK_CHECK_EVERY and at the end, soakcheck_test.go checks
// that the Kubernetes objects, Carve's resources, the LVs (names, sizes,
// layouts, activation), the mounts and the capacity (the VG's free space
// against the model, NodeStorage against lvm2's own report) are exactly
// what the model says. At the end every volume is brought up and read,
// everything is deleted, nothing may be left, and the capacity carve
// reports (NodeStorage, and csi-provisioner's CSIStorageCapacity of every
// class) must match the VG's real free space.
//
// The seed (CARVE_E2E_SOAK_SEED, printed) repeats the choices; which
// operation ends first, and so the interleaving, follows timing.
func TestClusterSoak(t *testing.T) {
	fullRunOnly(t)
	cfg := readSoakConfig(t)
	if cfg.duration == 0 {
		t.Skip("CARVE_E2E_SOAK_DURATION=0")
	}
	s := newClusterSoak(t, cfg)
	t.Cleanup(s.cleanUp)
	t.Logf("cluster soak: seed %d (CARVE_E2E_SOAK_SEED=%d repeats its choices), %s of chaos, up to %d operations at a time, a kill every %s on average, checks every %s, deadline %s",
		cfg.seed, cfg.seed, cfg.duration, soakInFlight, cfg.killEvery, cfg.checkEvery, cfg.deadline)
	s.setUp()
	s.chaos()
	s.finish()
	t.Log(s.stats.report(cfg, time.Since(s.began)))
	t.Log(s.stats.summary(cfg, time.Since(s.began)))
}

type soakConfig struct {
	seed                                      uint64
	duration, killEvery, checkEvery, deadline time.Duration
}

// The model's bounds: operations in flight at once, live claims and
// snapshots. The VM node is one emulated core: more at once only queues.
const (
	soakInFlight  = 3
	soakMaxClaims = 5
	soakMaxSnaps  = 3
)

// soakDefaultDuration is what make e2e, and so CI, runs; make soak-cluster
// runs longer.
const soakDefaultDuration = 90 * time.Second

func readSoakConfig(t *testing.T) soakConfig {
	t.Helper()
	c := soakConfig{seed: uint64(time.Now().UnixNano()), duration: soakDefaultDuration,
		killEvery: 20 * time.Second, checkEvery: time.Minute, deadline: hangGuard(4 * time.Minute)}
	if s := os.Getenv("CARVE_E2E_SOAK_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CARVE_E2E_SOAK_SEED=%q: %v", s, err)
		}
		c.seed = n
	}
	for env, d := range map[string]*time.Duration{"CARVE_E2E_SOAK_DURATION": &c.duration,
		"CARVE_E2E_SOAK_KILL_EVERY": &c.killEvery, "CARVE_E2E_SOAK_CHECK_EVERY": &c.checkEvery,
		"CARVE_E2E_SOAK_DEADLINE": &c.deadline} {
		if s := os.Getenv(env); s != "" {
			v, err := time.ParseDuration(s)
			if err != nil || v < 0 || (v == 0 && env != "CARVE_E2E_SOAK_DURATION") {
				t.Fatalf("%s=%q: want a positive duration", env, s)
			}
			*d = v
		}
	}
	return c
}

// chaos runs random operations and kills until the duration is over, then
// lets the operations in flight end. Before each periodic check it starts
// nothing new until the ones in flight have ended: the check needs a
// cluster at rest.
func (s *clusterSoak) chaos() {
	end := time.Now().Add(s.cfg.duration)
	nextKill := time.Now().Add(s.killDelay())
	nextCheck := time.Now().Add(s.cfg.checkEvery)
	for time.Now().Before(end) {
		s.advance()
		if time.Now().After(nextKill) {
			s.kill()
			nextKill = time.Now().Add(s.killDelay())
		}
		if time.Now().After(nextCheck) {
			if len(s.ops) == 0 {
				s.check("periodic")
				nextCheck = time.Now().Add(s.cfg.checkEvery)
			}
		} else {
			s.startSome()
		}
		time.Sleep(time.Second)
	}
	s.logf("chaos over; waiting for the %d operations in flight", len(s.ops))
	s.drain()
}

// killDelay is the time to the next kill: exponential around the mean,
// as independent failures come, within a tenth and three times the mean.
func (s *clusterSoak) killDelay() time.Duration {
	d := time.Duration(s.rng.ExpFloat64() * float64(s.cfg.killEvery))
	return min(max(d, s.cfg.killEvery/10), 3*s.cfg.killEvery)
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
	for _, c := range s.claims {
		if c.pod == nil {
			s.startPod(c)
		}
	}
	s.drain()
	s.check("final")
	for _, c := range s.claims {
		s.deleteClaim(c)
	}
	for _, sn := range s.snaps {
		s.deleteSnapshot(sn)
	}
	s.drain()
	s.checkEnd()
}

// newSoakRand is the soak's source of choices. ChaCha8, not PCG: PCG
// seeded with small numbers (1, 2, 3...) starts with much the same
// outputs, so seeds 1 and 2 made the same first claims.
func newSoakRand(seed uint64) *rand.Rand {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	return rand.New(rand.NewChaCha8(key))
}
