package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// copyCRDs copies the snapshot CRDs out of the (read-only) module cache,
// so that cluster users need neither Go nor the module cache. The
// VolumeSnapshot and VolumeGroupSnapshot CRDs are not in the snapshotter
// module's zip but in its client sub-module (versions.sh).
func (b builder) copyCRDs(ctx context.Context, v versions) error {
	globs := v.arrays["SNAPSHOT_CRD_GLOBS"]
	mod := v.at("SNAPSHOT_CRD")
	return b.copyOut(ctx, "crd", "snapshot CRDs", mod, mod+" "+strings.Join(globs, " "), func(dir string) error {
		src := filepath.Join(dir, v.get("SNAPSHOT_CRD_DIR"))
		old, _ := filepath.Glob(filepath.Join(b.cache.crd(), "*.yaml"))
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
		for _, g := range globs {
			files, _ := filepath.Glob(filepath.Join(src, g))
			if len(files) == 0 {
				return fmt.Errorf("no CRD matching %s in %s", g, src)
			}
			if err := copyFiles(files, b.cache.crd()); err != nil {
				return err
			}
		}
		return nil
	})
}

// copyAddons copies snapshot-controller's own manifests (RBAC and
// Deployment), the add-on as its project ships it; the e2e applies them
// with its image set to the version built here.
func (b builder) copyAddons(ctx context.Context, v versions) error {
	mod := v.at("SNAPSHOTTER")
	return b.copyOut(ctx, "addons", "snapshot-controller yaml", mod, mod+" snapshot-controller", func(dir string) error {
		src, dst := filepath.Join(dir, "deploy", "kubernetes", "snapshot-controller"), b.cache.addons("snapshot-controller")
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		return copyFiles([]string{filepath.Join(src, "rbac-snapshot-controller.yaml"),
			filepath.Join(src, "setup-snapshot-controller.yaml")}, dst)
	})
}

// copyOut runs copy on module mod's directory in the module cache,
// unless stamps/STAMP says it ran for fp (the module's version and what
// is taken from it).
func (b builder) copyOut(ctx context.Context, stamp, what, mod, fp string, copy func(dir string) error) error {
	if b.cache.hasStamp(stamp, fp) {
		fmt.Printf("%-24s cached\n", what)
		return nil
	}
	dir, err := b.moduleDir(ctx, mod)
	if err != nil {
		return err
	}
	if err := copy(dir); err != nil {
		return fmt.Errorf("%s from %s: %w", what, mod, err)
	}
	fmt.Printf("%-24s copied\n", what)
	return os.WriteFile(b.cache.stamp(stamp), []byte(fp), 0o644)
}

// moduleDir downloads MODULE@VERSION and returns its directory in the
// module cache.
func (b builder) moduleDir(ctx context.Context, modAtVersion string) (string, error) {
	out, err := b.gorun.run(ctx, ".", "mod", "download", "-json", modAtVersion)
	if err != nil {
		return "", err
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", modAtVersion, err)
	}
	if m.Dir == "" {
		return "", fmt.Errorf("go mod download %s named no directory", modAtVersion)
	}
	return m.Dir, nil
}

// copyFiles copies files into the directory dst, writable (the module
// cache's files are read-only, and a later copy replaces them).
func copyFiles(files []string, dst string) error {
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
