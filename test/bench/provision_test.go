//go:build bench

package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"carve.dev/carve/test/bench/results"
)

// provisionSize is the size of the provisioning section's volumes: big
// enough that zeroing a thick one on delete is more than noise.
const provisionSize = 256 * mib

// provisioning compares CreateVolume + DeleteVolume with lvcreate +
// lvremove of the same size and type, one at a time and many at once.
// Carve zeroes a thick volume before removing it (driver/lvmvol/wipe.go):
// its share, the blkdiscard runs, is the wipe column.
func (e *env) provisioning() {
	for _, thin := range []bool{false, true} {
		e.provisionSerial(thin)
	}
	for _, thin := range []bool{false, true} {
		e.provisionParallel(thin)
	}
}

func (e *env) provisionSerial(thin bool) {
	ctx := context.Background()
	var k cmdsPerOp
	var wipes []float64
	raw, carve := e.pairs(e.cfg.reps, func() float64 {
		return e.timed(func() error { return e.rawCycle(ctx, e.name("raw"), thin) })
	}, func() float64 {
		d := e.carveTimed(&k, func() error { return e.carveCycle(ctx, e.name("pvc"), thin) })
		wipes = append(wipes, k.last.seconds["blkdiscard"])
		return d
	})
	e.add(results.Row{Section: "provisioning", Op: kind(thin) + " create+delete, serial", Unit: "s",
		RawS: raw, CarveS: carve, WipeS: wipes, Goal: ratioGoal("<=", 1.15)}, &k)
}

// provisionParallel times batches of cfg.parallel cycles at once, raw and
// Carve batches taking turns. The wipe column is the batch's blkdiscard
// time summed over its deletes, which overlap.
func (e *env) provisionParallel(thin bool) {
	ctx := context.Background()
	n := e.cfg.parallel
	var k cmdsPerOp
	var wipes []float64
	raw, carve := e.pairs(e.cfg.parReps, func() float64 {
		return e.timed(func() error { return batch(n, func() error { return e.rawCycle(ctx, e.name("raw"), thin) }) })
	}, func() float64 {
		d := e.carveTimed(&k, func() error {
			return batch(n, func() error { return e.carveCycle(ctx, e.name("pvc"), thin) })
		})
		wipes = append(wipes, k.last.seconds["blkdiscard"])
		return d
	})
	e.add(results.Row{Section: "provisioning", Op: fmt.Sprintf("%s create+delete, %d parallel", kind(thin), n), Unit: "s",
		RawS: raw, CarveS: carve, WipeS: wipes, Goal: ratioGoal("<=", 1.15),
		Note: "wipe: blkdiscard seconds summed over the batch's overlapping deletes"}, &k)
}

func (e *env) rawCycle(ctx context.Context, name string, thin bool) error {
	if err := e.rawLV(ctx, name, provisionSize, thin); err != nil {
		return err
	}
	return e.rawRemove(ctx, name)
}

func (e *env) carveCycle(ctx context.Context, name string, thin bool) error {
	v, err := e.create(ctx, name, provisionSize, thin, "")
	if err != nil {
		return err
	}
	return v.Delete(ctx)
}

// batch runs fn n times at once and returns their errors joined.
func batch(n int, fn func() error) error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = fn() })
	}
	wg.Wait()
	return errors.Join(errs...)
}
