package mapper

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"carve.dev/carve/driver/volume"
)

// recorder is a fake Control: it records each operation ("suspend NAME")
// and fails those named in fail with their error.
type recorder struct {
	calls []string
	fail  map[string]error
}

func (r *recorder) do(op, name string) error {
	r.calls = append(r.calls, op+" "+name)
	return r.fail[op]
}

func (r *recorder) Create(_ context.Context, name, _ string, _ []Target) (uint64, error) {
	return 0, r.do("create", name)
}
func (r *recorder) Load(_ context.Context, name string, _ []Target) error { return r.do("load", name) }
func (r *recorder) Suspend(_ context.Context, name string) error          { return r.do("suspend", name) }
func (r *recorder) Resume(_ context.Context, name string) error           { return r.do("resume", name) }
func (r *recorder) Remove(_ context.Context, name string, _ uint64) error {
	return r.do("remove", name)
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
	if got := table(2048, rdev); len(got) != 1 || got[0] != (Target{Length: 2048, Type: "linear", Params: "253:7 0"}) {
		t.Errorf("table = %+v", got)
	}
	if got := LinearUUID(rdev); got != "CARVE-LINEAR-253-7" {
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
	if want := []string{"resume vg0-a-carve"}; !slices.Equal(r.calls, want) {
		t.Fatalf("commands %q, want %q", r.calls, want)
	}
}

// TestSuspendOrRemoveRefused: a suspend that fails is followed by a
// resume (it may have taken effect in the kernel before it was cut).
func TestSuspendRefused(t *testing.T) {
	r := &recorder{fail: map[string]error{"suspend": unix.EINTR, "remove": unix.EBUSY}}
	l := NewLinear(r)
	d := Device{Name: "vg0-a-carve"}
	if err := l.Suspend(context.Background(), d); err == nil {
		t.Fatal("a failed suspend succeeded")
	}
	if want := []string{"suspend vg0-a-carve", "resume vg0-a-carve"}; !slices.Equal(r.calls, want) {
		t.Fatalf("operations %q, want %q", r.calls, want)
	}
}

// TestIoctlABI: the request structures have the kernel's sizes, the
// ioctl numbers libdevmapper uses, and a table is laid out as
// DM_TABLE_LOAD reads it (each target's parameters NUL-terminated, the
// next one 8-byte aligned).
func TestIoctlABI(t *testing.T) {
	if n := binary.Size(dmIoctl{}); n != dmIoctlSize {
		t.Errorf("struct dm_ioctl is %d bytes, want %d", n, dmIoctlSize)
	}
	if n := binary.Size(dmTargetSpec{}); n != dmTargetSize {
		t.Errorf("struct dm_target_spec is %d bytes, want %d", n, dmTargetSize)
	}
	if got := ioctlNumber(dmDevCreate); got != 0xc138fd03 {
		t.Errorf("DM_DEV_CREATE is %#x, want 0xc138fd03", got)
	}
	p, err := tablePayload(table(2048, unix.Mkdev(253, 7)))
	if err != nil {
		t.Fatal(err)
	}
	params := "253:7 0"
	if want := (dmTargetSize + len(params) + 1 + 7) &^ 7; len(p) != want || binary.NativeEndian.Uint32(p[20:]) != uint32(want) {
		t.Fatalf("payload of %d bytes, next %d; want %d", len(p), binary.NativeEndian.Uint32(p[20:]), want)
	}
	if got := string(p[24 : 24+len("linear")]); got != "linear" || binary.NativeEndian.Uint64(p[8:]) != 2048 {
		t.Errorf("target type %q, length %d", got, binary.NativeEndian.Uint64(p[8:]))
	}
	if got := p[dmTargetSize : dmTargetSize+len(params)+1]; string(got) != params+"\x00" {
		t.Errorf("parameters %q", got)
	}
	if _, err := header(strings.Repeat("n", dmNameLen)); err == nil {
		t.Error("a name over the kernel's limit was taken")
	}
}
