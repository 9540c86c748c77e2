//go:build bench

package bench

import (
	"context"
	"os"

	"carve.dev/carve/test/bench/results"
	"carve.dev/carve/test/csiflow"
)

// nodeSize fits both filesystems: mkfs.xfs refuses less than 300 MiB.
const nodeSize = 320 * mib

// attach compares ControllerPublish + ControllerUnpublish, which activate
// and deactivate the LV, with lvchange -ay and -an of a raw LV.
func (e *env) attach() {
	ctx := context.Background()
	v, err := e.create(ctx, e.name("pvc"), 64*mib, false, "")
	e.must(err)
	raw := e.name("raw")
	e.must(e.rawLV(ctx, raw, 64*mib, false))
	e.must(e.lvmCmd(ctx, "lvchange", "-an", vg+"/"+raw))
	var k cmdsPerOp
	rs, cs := e.pairs(e.cfg.reps, func() float64 {
		return e.timed(func() error {
			if err := e.lvmCmd(ctx, "lvchange", "-ay", vg+"/"+raw); err != nil {
				return err
			}
			return e.lvmCmd(ctx, "lvchange", "-an", vg+"/"+raw)
		})
	}, func() float64 {
		return e.carveTimed(&k, func() error {
			if err := v.Attach(ctx, node); err != nil {
				return err
			}
			return v.Detach(ctx)
		})
	})
	e.add(results.Row{Section: "attach", Op: "ControllerPublish+Unpublish vs lvchange -ay/-an", Unit: "s",
		RawS: rs, CarveS: cs, Goal: ratioGoal("<=", 1.10)}, &k)
	e.must(v.Delete(ctx))
	e.must(e.rawRemove(ctx, raw))
}

// nodePath compares NodeStage (format and mount) + NodePublish (bind
// mount) with mkfs, mount and mount --bind on a raw LV, and the way back
// (NodeUnpublish + NodeUnstage against two umounts). Every sample gets a
// fresh blank LV, since only a blank device is formatted; making and
// removing it is not timed.
func (e *env) nodePath(fs string) {
	var up, down cmdsPerOp
	var rawUp, rawDown, carveUp, carveDown []float64
	for range e.cfg.reps {
		u, d := e.rawNodeCycle(fs)
		rawUp, rawDown = append(rawUp, u), append(rawDown, d)
		u, d = e.carveNodeCycle(fs, &up, &down)
		carveUp, carveDown = append(carveUp, u), append(carveDown, d)
	}
	e.add(results.Row{Section: "node", Op: fs + ": NodeStage+NodePublish vs mkfs+mount+bind", Unit: "s",
		RawS: rawUp, CarveS: carveUp, Goal: ratioGoal("<=", 1.10)}, &up)
	e.add(results.Row{Section: "node", Op: fs + ": NodeUnpublish+NodeUnstage vs umount x2", Unit: "s",
		RawS: rawDown, CarveS: carveDown, Goal: ratioGoal("<=", 1.10)}, &down)
}

func (e *env) rawNodeCycle(fs string) (up, down float64) {
	ctx := context.Background()
	name := e.name("raw")
	e.must(e.rawLV(ctx, name, nodeSize, false))
	staging, target := e.path("raw-staging"), e.path("raw-target")
	up = e.timed(func() error {
		if _, err := e.dataCmd("mkfs."+fs, mkfsArgs(fs, device(name))...); err != nil {
			return err
		}
		for _, dir := range []string{staging, target} {
			if err := os.Mkdir(dir, 0o750); err != nil {
				return err
			}
		}
		if _, err := e.cmd(ctx, "mount", "-t", fs, device(name), staging); err != nil {
			return err
		}
		_, err := e.cmd(ctx, "mount", "--bind", staging, target)
		return err
	})
	down = e.timed(func() error {
		for _, dir := range []string{target, staging} {
			if _, err := e.cmd(ctx, "umount", dir); err != nil {
				return err
			}
		}
		return nil
	})
	e.must(e.rawRemove(ctx, name))
	return up, down
}

// mkfsArgs are a plain format of device, forced (-F/-f: a fresh LV may
// carry nothing, but mkfs would ask on a terminal otherwise) and quiet.
func mkfsArgs(fs, device string) []string {
	if fs == "xfs" {
		return []string{"-q", "-f", device}
	}
	return []string{"-q", "-F", device}
}

func (e *env) carveNodeCycle(fs string, upCmds, downCmds *cmdsPerOp) (up, down float64) {
	ctx := context.Background()
	v, err := e.create(ctx, e.name("pvc"), nodeSize, false, fs)
	e.must(err)
	e.must(v.Attach(ctx, node))
	target := e.path("target")
	up = e.carveTimed(upCmds, func() error { return stagePublish(ctx, v, e.path("staging"), target) })
	down = e.carveTimed(downCmds, func() error {
		if err := v.Unpublish(ctx, target); err != nil {
			return err
		}
		return v.Unstage(ctx)
	})
	e.must(v.Detach(ctx))
	e.must(v.Delete(ctx))
	return up, down
}

func stagePublish(ctx context.Context, v *csiflow.Volume, staging, target string) error {
	if err := v.Stage(ctx, staging); err != nil {
		return err
	}
	return v.Publish(ctx, target, false)
}
