package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// modulesDir holds the committed build modules, one directory each.
const modulesDir = "scripts/k8s/modules"

// cache is one key's directory: bin/, crd/, addons/, stamps/.
type cache struct{ dir string }

func (c cache) bin() string               { return filepath.Join(c.dir, "bin") }
func (c cache) tmp() string               { return filepath.Join(c.dir, ".tmp") }
func (c cache) stamp(name string) string  { return filepath.Join(c.dir, "stamps", name) }
func (c cache) addons(name string) string { return filepath.Join(c.dir, "addons", name) }
func (c cache) binary(name string) string { return filepath.Join(c.bin(), name) }
func (c cache) crd() string               { return filepath.Join(c.dir, "crd") }

// hasStamp: stamps/NAME holds v.
func (c cache) hasStamp(name, v string) bool {
	b, err := os.ReadFile(c.stamp(name))
	return err == nil && string(b) == v
}

// current: every binary of the plan is there and the stamp matches.
func (c cache) current(stamp, want string, plan []group) bool {
	for _, b := range binariesOf(plan) {
		if st, err := os.Stat(c.binary(b)); err != nil || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return c.hasStamp(stamp, want)
}

// builder builds groups into a cache.
type builder struct {
	gorun goRunner
	cache cache
}

// buildPlan builds each group, then writes the stamp: a run killed
// half-way leaves none, and the next one builds again.
func (b builder) buildPlan(ctx context.Context, stamp, fp string, plan []group) error {
	if err := os.Remove(b.cache.stamp(stamp)); err != nil && !os.IsNotExist(err) {
		return err
	}
	for _, g := range plan {
		if err := b.build(ctx, g); err != nil {
			return err
		}
	}
	return os.WriteFile(b.cache.stamp(stamp), []byte(fp), 0o644)
}

// build runs one group's go build (or go test -c) into a scratch
// directory and moves its binaries into bin/, so that a killed build
// never leaves a half-written binary there.
func (b builder) build(ctx context.Context, g group) error {
	start, dir := time.Now(), filepath.Join(modulesDir, g.module)
	tmp, err := filepath.Abs(b.cache.tmp())
	if err != nil {
		return err
	}
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	args, err := b.buildArgs(ctx, g, dir, tmp)
	if err != nil {
		return err
	}
	if _, err := b.gorun.run(ctx, dir, args...); err != nil {
		return fmt.Errorf("building %s: %w", strings.Join(g.binaries(), ", "), err)
	}
	for _, name := range g.binaries() {
		if err := os.Rename(filepath.Join(tmp, name), b.cache.binary(name)); err != nil {
			return fmt.Errorf("moving %s into bin: %w", name, err)
		}
		st, err := os.Stat(b.cache.binary(name))
		if err != nil {
			return err
		}
		fmt.Printf("%-24s %4d MB\n", name, st.Size()>>20)
	}
	logf("built %d binaries in %ds", len(g.binaries()), int(time.Since(start).Seconds()))
	return nil
}

// buildArgs is the go command line of a group.
func (b builder) buildArgs(ctx context.Context, g group, dir, tmp string) ([]string, error) {
	args := []string{"build"}
	out := tmp + string(filepath.Separator)
	if g.testBin != "" {
		args, out = []string{"test", "-c"}, filepath.Join(tmp, g.testBin)
	}
	args = append(args, noOptGcflags()...)
	if g.noOpt {
		extra, err := b.graphGcflags(ctx, dir, g.pkgs)
		if err != nil {
			return nil, err
		}
		args = append(args, extra...)
	}
	args = append(args, "-ldflags=-s -w "+g.ldflags, "-o", out)
	return append(args, g.pkgs...), nil
}
