package crypt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm/runner"
)

const secret = "correct horse battery staple"

// fakeRun records each command and its stdin, and answers with exit.
type fakeRun struct {
	calls [][]string
	input []string
	exit  int
	out   string
}

func (f *fakeRun) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return f.RunInput(ctx, nil, name, args...)
}

func (f *fakeRun) RunInput(_ context.Context, input []byte, name string, args ...string) ([]byte, error) {
	f.calls = append(f.calls, append([]string{name}, args...))
	f.input = append(f.input, string(input))
	if f.exit != 0 {
		return nil, &runner.Error{Name: name, Args: args, ExitCode: f.exit, Stderr: "cryptsetup said no", Err: errors.New("exit status")}
	}
	return []byte(f.out), nil
}

func key(t *testing.T) Key {
	t.Helper()
	k, err := KeyFrom(map[string]string{SecretKey: secret}, "node-stage")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// The key goes to stdin with --key-file=-, never into an argument, and no
// error shows it.
func TestKeyOnlyOnStdin(t *testing.T) {
	k := key(t)
	for _, exit := range []int{0, 1, 2, 5} {
		f := &fakeRun{exit: exit}
		c := New(f, DefaultPBKDF)
		errs := []error{
			c.Format(context.Background(), "/dev/vg/lv", k),
			c.Open(context.Background(), "/dev/vg/lv", "vg-lv-crypt", k),
			c.Resize(context.Background(), "vg-lv-crypt", k),
		}
		for i, call := range f.calls {
			if !slices.Contains(call, "--key-file=-") || f.input[i] != secret {
				t.Errorf("%v: stdin %q, want the key through --key-file=-", call, f.input[i])
			}
			for _, a := range call {
				if strings.Contains(a, secret) {
					t.Errorf("%v: the key is an argument", call)
				}
			}
		}
		for _, err := range errs {
			if err != nil && strings.Contains(fmt.Sprintf("%v %+v %#v", err, err, err), secret) {
				t.Errorf("error shows the key: %v", err)
			}
		}
	}
}

func TestFormatArgs(t *testing.T) {
	f := &fakeRun{}
	if err := New(f, PBKDF{MemoryKiB: 32768, Iterations: 5}).Format(context.Background(), "/dev/vg/lv", key(t)); err != nil {
		t.Fatal(err)
	}
	want := "cryptsetup luksFormat --batch-mode --type luks2 --pbkdf argon2id --pbkdf-memory 32768 --pbkdf-force-iterations 5 --pbkdf-parallel 1 --key-file=- /dev/vg/lv"
	if got := strings.Join(f.calls[0], " "); got != want {
		t.Errorf("ran %q, want %q", got, want)
	}
}

// cryptsetup's exit codes become Carve's errors: 2 a wrong key, a close of
// a mapping that is not there succeeds, a busy one is in use.
func TestExitCodes(t *testing.T) {
	c := New(&fakeRun{exit: 2}, DefaultPBKDF)
	if err := c.Open(context.Background(), "/dev/vg/lv", "vg-lv-crypt", key(t)); !errors.Is(err, volume.ErrWrongKey) {
		t.Errorf("open with exit 2: %v, want ErrWrongKey", err)
	}
	if err := c.Resize(context.Background(), "vg-lv-crypt", key(t)); !errors.Is(err, volume.ErrWrongKey) {
		t.Errorf("resize with exit 2: %v, want ErrWrongKey", err)
	}
	if err := New(&fakeRun{exit: 4}, DefaultPBKDF).Close(context.Background(), "vg-lv-crypt"); err != nil {
		t.Errorf("close of no mapping: %v, want done", err)
	}
	if err := New(&fakeRun{exit: 5}, DefaultPBKDF).Close(context.Background(), "vg-lv-crypt"); !errors.Is(err, volume.ErrInUse) {
		t.Errorf("close of a busy mapping: %v, want ErrInUse", err)
	}
	if err := New(&fakeRun{exit: 1}, DefaultPBKDF).Open(context.Background(), "/dev/vg/lv", "vg-lv-crypt", key(t)); err == nil || errors.Is(err, volume.ErrWrongKey) {
		t.Errorf("open with exit 1: %v, want another failure", err)
	}
}

func TestKeyslots(t *testing.T) {
	for out, want := range map[string]int{
		`{"keyslots":{},"segments":{}}`:                   0,
		`{"keyslots":{"0":{"type":"luks2"}},"tokens":{}}`: 1,
		`{"keyslots":{"0":{},"3":{}}}`:                    2,
	} {
		got, err := New(&fakeRun{out: out}, DefaultPBKDF).Keyslots(context.Background(), "/dev/vg/lv")
		if err != nil || got != want {
			t.Errorf("Keyslots(%s) = %d, %v; want %d", out, got, err, want)
		}
	}
	if _, err := New(&fakeRun{out: "not json"}, DefaultPBKDF).Keyslots(context.Background(), "/dev/vg/lv"); err == nil {
		t.Error("Keyslots of garbage: no error")
	}
}

// A missing, empty or oversized key is INVALID_ARGUMENT, and the message
// never holds a value.
func TestKeyFrom(t *testing.T) {
	for _, secrets := range []map[string]string{nil, {"other": secret}, {SecretKey: ""}, {SecretKey: strings.Repeat("k", maxKeyBytes+1)}} {
		_, err := KeyFrom(secrets, "node-stage")
		if !errors.Is(err, volume.ErrInvalidArgument) {
			t.Errorf("KeyFrom(%d entries): %v, want ErrInvalidArgument", len(secrets), err)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("error shows a secret: %v", err)
		}
	}
	k := key(t)
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s %q %x", k, k, k, k, k, k), fmt.Sprint([]Key{k})} {
		if strings.Contains(s, secret) || strings.Contains(s, fmt.Sprintf("%x", secret)) {
			t.Errorf("a formatted key shows it: %s", s)
		}
	}
}

func TestMappingName(t *testing.T) {
	for _, tc := range []struct{ vg, lv, want string }{
		{"vg0", "pvc-1", "vg0-pvc--1-crypt"},
		{"my-vg", "csi-0123", "my--vg-csi--0123-crypt"},
	} {
		got, err := MappingName(tc.vg, tc.lv)
		if err != nil || got != tc.want {
			t.Errorf("MappingName(%s, %s) = %q, %v; want %q", tc.vg, tc.lv, got, err, tc.want)
		}
		vg, lv, ok := VolumeOf(got)
		if !ok || vg != tc.vg || lv != tc.lv {
			t.Errorf("VolumeOf(%q) = %s, %s, %t", got, vg, lv, ok)
		}
	}
	for _, bad := range [][2]string{{"..", "lv"}, {"vg", "../x"}, {"vg", ""}, {strings.Repeat("v", 60), strings.Repeat("l", 62)}} {
		if _, err := MappingName(bad[0], bad[1]); !errors.Is(err, volume.ErrInvalidArgument) {
			t.Errorf("MappingName(%q, %q): %v, want ErrInvalidArgument", bad[0], bad[1], err)
		}
	}
	for _, other := range []string{"vg0-pvc--1", "vg0-pvc--1-real", "vg0-pvc-1-crypt", "luks-1234", ""} {
		if _, _, ok := VolumeOf(other); ok {
			t.Errorf("VolumeOf(%q): a volume's mapping", other)
		}
	}
}

func TestPBKDFValidate(t *testing.T) {
	if err := DefaultPBKDF.Validate(); err != nil {
		t.Errorf("default: %v", err)
	}
	for _, p := range []PBKDF{{MemoryKiB: 1024, Iterations: 4}, {MemoryKiB: 65536, Iterations: 3}, {MemoryKiB: 8 << 20, Iterations: 4}} {
		if p.Validate() == nil {
			t.Errorf("%+v accepted", p)
		}
	}
}
