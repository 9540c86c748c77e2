package main

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestLVMEnvDisablesUdevOnlyWithoutIt(t *testing.T) {
	dir := t.TempDir()
	control := filepath.Join(dir, "control")
	if env := lvmEnv(control); !slices.Contains(env, "DM_DISABLE_UDEV=1") {
		t.Errorf("no udev control socket: env %v lacks DM_DISABLE_UDEV=1", env)
	}
	if err := os.WriteFile(control, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if env := lvmEnv(control); slices.Contains(env, "DM_DISABLE_UDEV=1") {
		t.Errorf("udev running: env %v must leave udev on", env)
	}
	if env := lvmEnv(control); !slices.Contains(env, "LVM_SUPPRESS_FD_WARNINGS=1") {
		t.Errorf("env %v lacks LVM_SUPPRESS_FD_WARNINGS=1", env)
	}
}

// TestPathRootFlag: --path-root defaults to kubelet's directory, and a
// root that would let paths reach anything ("/", relative, unclean) stops
// carve at start.
func TestPathRootFlag(t *testing.T) {
	parse := func(args ...string) (localFlags, error) {
		var f localFlags
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		f.register(fs, "unix:///x.sock")
		if err := fs.Parse(append([]string{"--volume-groups=vg0", "--node-id=n"}, args...)); err != nil {
			return f, err
		}
		return f, f.validate()
	}
	f, err := parse()
	if err != nil || f.root.Dir() != "/var/lib/kubelet" {
		t.Fatalf("default: root %q, %v", f.root.Dir(), err)
	}
	if f, err := parse("--path-root=/tmp/co"); err != nil || f.root.Dir() != "/tmp/co" {
		t.Fatalf("--path-root=/tmp/co: root %q, %v", f.root.Dir(), err)
	}
	for _, bad := range []string{"/", "", "relative", "/var/lib/kubelet/"} {
		if _, err := parse("--path-root=" + bad); err == nil {
			t.Errorf("--path-root=%q accepted", bad)
		}
	}
}
