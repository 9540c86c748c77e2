package main

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"carve.dev/carve/lvm"
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

// TestEndpointFlag: --endpoint is a unix socket, as a URL or a bare path,
// read by the same rule as the server that listens on it; another scheme
// stops carve at start.
func TestEndpointFlag(t *testing.T) {
	parse := func(endpoint string) error {
		var f localFlags
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		f.register(fs, "unix:///x.sock")
		if err := fs.Parse([]string{"--volume-groups=vg0", "--node-id=n", "--endpoint=" + endpoint}); err != nil {
			return err
		}
		return f.validate()
	}
	for _, good := range []string{"unix:///csi/csi.sock", "/csi/csi.sock"} {
		if err := parse(good); err != nil {
			t.Errorf("--endpoint=%s refused: %v", good, err)
		}
	}
	for _, bad := range []string{"tcp://127.0.0.1:10000", "http://x/csi.sock", "", "csi.sock", "unix://host/csi.sock"} {
		if err := parse(bad); err == nil {
			t.Errorf("--endpoint=%s accepted", bad)
		}
	}
}

// FuzzParseVGs: --volume-groups. An accepted list names only valid VG
// names, at least one, and reads back the same from its names joined by
// commas; a refused one is an error at start, never a panic.
func FuzzParseVGs(f *testing.F) {
	for _, s := range []string{"vg0", "vg0,vg1", " vg0 , vg1 ", "", ",", "vg0,,", "../vg", "vg0;reboot", "-vg", "ä", strings.Repeat("v", 128)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		vgs, err := parseVGs(s)
		if err != nil {
			return
		}
		if len(vgs) == 0 {
			t.Fatalf("%q: no VG and no error", s)
		}
		for _, vg := range vgs {
			if lvm.ValidateVGName(vg) != nil {
				t.Fatalf("%q: VG %q accepted", s, vg)
			}
		}
		if back, err := parseVGs(strings.Join(vgs, ",")); err != nil || !slices.Equal(back, vgs) {
			t.Fatalf("%q -> %q -> %q, %v", s, vgs, back, err)
		}
	})
}

// TestNodeIDFlag: --node-id must be a valid topology segment value
// (volume.ValidateNodeID): a volume ID "node/vg/lv" made with a '/' in it
// would never parse back.
func TestNodeIDFlag(t *testing.T) {
	parse := func(id string) error {
		var f localFlags
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		f.register(fs, "unix:///x.sock")
		if err := fs.Parse([]string{"--volume-groups=vg0", "--node-id=" + id}); err != nil {
			return err
		}
		return f.validate()
	}
	for _, ok := range []string{"n", "carve-vm", "ip-10-0-0-1.ec2.internal"} {
		if err := parse(ok); err != nil {
			t.Errorf("--node-id=%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"a/b", "(none)", "-x", strings.Repeat("n", 64), "x y"} {
		if err := parse(bad); err == nil {
			t.Errorf("--node-id=%q accepted", bad)
		}
	}
}
