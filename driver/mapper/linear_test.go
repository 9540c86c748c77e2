package mapper

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm/runner"
)

// recorder is a fake dmsetup: it records each command line and fails those
// named in fail with their stderr.
type recorder struct {
	calls []string
	fail  map[string]string
}

func (r *recorder) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	line := name + " " + strings.Join(args, " ")
	r.calls = append(r.calls, line)
	if stderr, ok := r.fail[args[0]]; ok {
		return nil, &runner.Error{Name: name, Args: args, ExitCode: 1, Stderr: stderr, Err: errors.New("exit status 1")}
	}
	return nil, nil
}

func TestLinearNames(t *testing.T) {
	name, err := Name("vg-0", "pvc-1", LinearLayer)
	if err != nil || name != "vg--0-pvc--1-carve" {
		t.Fatalf("Name = %q, %v", name, err)
	}
	if vg, lv, ok := VolumeOf(name, LinearLayer); !ok || vg != "vg-0" || lv != "pvc-1" {
		t.Fatalf("VolumeOf(%q) = %q, %q, %t", name, vg, lv, ok)
	}
	for _, other := range []string{"vg--0-pvc--1", "vg--0-pvc--1-crypt", "vg--0-pvc--1-real"} {
		if _, _, ok := VolumeOf(other, LinearLayer); ok {
			t.Errorf("VolumeOf(%q) took another device for a layer", other)
		}
	}
	if _, err := Name("vg", strings.Repeat("l", 120), LinearLayer); !errors.Is(err, volume.ErrInvalidArgument) {
		t.Errorf("a name over the kernel's limit: %v", err)
	}
	rdev := unix.Mkdev(253, 7)
	if got := table(2048, rdev); got != "0 2048 linear 253:7 0" {
		t.Errorf("table = %q", got)
	}
	if got := linearUUID(rdev); got != "CARVE-LINEAR-253-7" {
		t.Errorf("uuid = %q", got)
	}
}

// fakeDM makes a sysfs device-mapper directory for a device.
func fakeDM(t *testing.T, root, dev, name, uuid, suspended string) {
	t.Helper()
	dir := filepath.Join(root, dev, "dm")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, text := range map[string]string{"name": name + "\n", "uuid": uuid + "\n", "suspended": suspended + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestResumeLeftovers: at carve's start, its layers left suspended are
// resumed; its active layers, other devices (suspended or not: an lvm2
// LV, someone's crypt mapping) are left alone.
func TestResumeLeftovers(t *testing.T) {
	root := t.TempDir()
	fakeDM(t, root, "dm-0", "vg0-a", "LVM-xyz", "1")
	fakeDM(t, root, "dm-1", "vg0-a-carve", "CARVE-LINEAR-253-0", "1")
	fakeDM(t, root, "dm-2", "vg0-b-carve", "CARVE-LINEAR-253-3", "0")
	fakeDM(t, root, "dm-3", "vg0-c-crypt", "CRYPT-LUKS2-abc", "1")
	if err := os.MkdirAll(filepath.Join(root, "sda"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := sysDMBlock
	sysDMBlock = root
	t.Cleanup(func() { sysDMBlock = old })

	r := &recorder{}
	got, err := NewLinear(r).ResumeLeftovers(context.Background())
	if err != nil || !slices.Equal(got, []string{"vg0-a-carve"}) {
		t.Fatalf("ResumeLeftovers = %q, %v", got, err)
	}
	if want := []string{"dmsetup resume vg0-a-carve"}; !slices.Equal(r.calls, want) {
		t.Fatalf("commands %q, want %q", r.calls, want)
	}
}

// TestSuspendOrRemoveRefused: a suspend that fails is followed by a
// resume (it may have taken effect in the kernel before it was cut); a
// removal of a layer still open is ErrInUse.
func TestSuspendOrRemoveRefused(t *testing.T) {
	r := &recorder{fail: map[string]string{"suspend": "device-mapper: suspend ioctl failed: Interrupted"}}
	l := NewLinear(r)
	d := Device{Name: "vg0-a-carve"}
	if err := l.Suspend(context.Background(), d); err == nil {
		t.Fatal("a failed suspend succeeded")
	}
	if want := []string{"dmsetup suspend vg0-a-carve", "dmsetup resume vg0-a-carve"}; !slices.Equal(r.calls, want) {
		t.Fatalf("commands %q, want %q", r.calls, want)
	}
	err := &runner.Error{Name: dmsetup, Stderr: "device-mapper: remove ioctl on vg0-a-carve failed: Device or resource busy"}
	if !busy(err) {
		t.Errorf("busy(%v) = false", err)
	}
	if busy(errors.New("device or resource busy")) {
		t.Error("busy took an error of no dmsetup run")
	}
}
