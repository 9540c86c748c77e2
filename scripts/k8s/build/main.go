// Command build builds the Kubernetes pieces Carve is tested against
// (etcd, the control plane, kubectl, kubelet, a fake CRI runtime, the CSI
// sidecars and snapshot-controller, helm) from the Go module proxy, plus
// the snapshot CRDs and snapshot-controller's manifests, into a cache
// directory keyed by the pins of scripts/k8s/versions.sh. The module
// graphs it builds from are committed under scripts/k8s/modules.
//
// usage, from the repository's root (scripts/k8s/build.sh runs it so):
//
//	go run ./scripts/k8s/build             the set the tests use
//	go run ./scripts/k8s/build upstream    the same, then the Kubernetes
//	    project's storage suite (e2e.test), its agnhost and the ginkgo CLI,
//	    which only the upstream run needs
//
// The last line of its output is the bin directory. One stamp covers each
// set, so a warm run only checks it.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		logf("error: %v", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	upstream := len(args) == 1 && args[0] == "upstream"
	if len(args) > 1 || len(args) == 1 && !upstream {
		return errors.New("usage: scripts/k8s/build.sh [upstream]")
	}
	start := time.Now()
	b, v, err := setup(ctx)
	if err != nil {
		return err
	}
	unlock, err := lock(b.cache.dir)
	if err != nil {
		return err
	}
	defer unlock()
	files, err := recipeFiles()
	if err != nil {
		return err
	}
	goVersion, err := b.gorun.run(ctx, ".", "env", "GOVERSION")
	if err != nil {
		return err
	}
	fp := fingerprint(files, strings.TrimSpace(string(goVersion)))
	if err := b.ensure(ctx, "bin", fp, basePlan(v)); err != nil {
		return err
	}
	if upstream {
		if err := b.ensure(ctx, "upstream", fp, upstreamPlan(v)); err != nil {
			return err
		}
	}
	if err := b.copyCRDs(ctx, v); err != nil {
		return err
	}
	if err := b.copyAddons(ctx, v); err != nil {
		return err
	}
	logf("done in %ds", int(time.Since(start).Seconds()))
	fmt.Println(b.cache.bin())
	return nil
}

// setup reads the pins and makes the cache directory of their key.
func setup(ctx context.Context) (builder, versions, error) {
	src, err := os.ReadFile("scripts/k8s/versions.sh")
	if err != nil {
		return builder{}, versions{}, fmt.Errorf("run from the repository's root (scripts/k8s/build.sh does): %w", err)
	}
	v, err := parseVersions(string(src))
	if err != nil {
		return builder{}, v, err
	}
	root, err := cacheRoot()
	if err != nil {
		return builder{}, v, err
	}
	c := cache{dir: filepath.Join(root, v.key())}
	for _, d := range []string{c.bin(), c.crd(), filepath.Dir(c.stamp("bin"))} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return builder{}, v, err
		}
	}
	logf("cache %s", c.dir)
	gr, err := newGoRunner()
	return builder{gorun: gr, cache: c}, v, err
}

// cacheRoot is CARVE_K8S_CACHE, or ~/.cache/carve-k8s, as versions.sh's
// K8S_CACHE.
func cacheRoot() (string, error) {
	if d := os.Getenv("CARVE_K8S_CACHE"); d != "" {
		return d, nil
	}
	home := os.Getenv("HOME")
	if home == "" {
		return "", errors.New("HOME must be set (or CARVE_K8S_CACHE)")
	}
	return filepath.Join(home, ".cache", "carve-k8s"), nil
}

// ensure builds a plan unless its binaries and stamp are current. Before
// the base plan, it warns of the modules compiled twice (drift).
func (b builder) ensure(ctx context.Context, stamp, fp string, plan []group) error {
	if b.cache.current(stamp, fp, plan) {
		fmt.Printf("%-24s cached\n", fmt.Sprintf("%d binaries", len(binariesOf(plan))))
		return nil
	}
	if stamp == "bin" {
		b.warnDrift(ctx, plan)
	}
	return b.buildPlan(ctx, stamp, fp, plan)
}

// warnDrift reports drift; a failed comparison is no reason not to build.
func (b builder) warnDrift(ctx context.Context, plan []group) {
	var kube []string
	for _, g := range plan {
		if g.module == "kube" {
			kube = append(kube, g.pkgs...)
		}
	}
	drift, err := b.drift(ctx, kube)
	switch {
	case err != nil:
		logf("warning: could not compare Carve's go.mod with the kube graph: %v", err)
	case len(drift) > 0:
		logf("warning: compiled twice, Carve's go.mod and the kube graph differ on:\n%s", strings.Join(drift, "\n"))
	}
}

// lock takes the cache's build lock, one build at a time per cache: a
// second run (e.g. make e2e while CI's prefetch is still building) waits,
// then finds everything built.
func lock(dir string) (func(), error) {
	name := filepath.Join(dir, ".build.lock")
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("build lock: %w", err)
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		logf("another build holds %s; waiting", name)
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			_ = f.Close() // nothing written: only the lock is let go
			return nil, fmt.Errorf("build lock %s: %w", name, err)
		}
	}
	return func() { _ = f.Close() }, nil // closing lets the lock go
}
