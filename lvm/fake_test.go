package lvm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"carve.dev/carve/lvm/runner"
)

// step is one command the fake runner expects, and its answer.
type step struct {
	args   []string // after "lvm"
	out    string   // stdout, or "@name" for testdata/name.json
	stderr string   // non-empty: fail with exit 5 and this stderr, or "@name" for testdata/name.stderr
	cut    bool     // with stderr: killed instead (exit code -1, as the runner reports a timeout)
}

// fakeRunner plays back steps in order and fails the test on any command
// that is not the next expected one, so tests pin down exact arguments.
type fakeRunner struct {
	t     *testing.T
	steps []step
}

// fixturePools are the thin pools of the fixtures, which newFake's Client
// takes as checked for a cut command's leftovers: only the tests of that
// check (thinrepair_test.go, with newUncheckedFake) expect its commands.
var fixturePools = [][2]string{{"carve-thin", "pool0"}, {"carve-thinops", "pool0"}, {"carve-thinops", "nopool"}}

func newFake(t *testing.T, steps ...step) *Client {
	t.Helper()
	c := newUncheckedFake(t, steps...)
	for _, p := range fixturePools {
		c.thin.markChecked(p[0], p[1])
	}
	return c
}

func newUncheckedFake(t *testing.T, steps ...step) *Client {
	t.Helper()
	f := &fakeRunner{t: t, steps: steps}
	t.Cleanup(func() {
		if len(f.steps) > 0 {
			t.Errorf("commands expected but not run: %v", f.steps[0].args)
		}
	})
	return New(f)
}

func (f *fakeRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	f.t.Helper()
	// dmsetup's and the thin tools' steps name them first; lvm's do not.
	got := args
	switch name {
	case "lvm":
	case dmsetupBinary, thinDumpBinary, thinDeltaBinary:
		got = append([]string{name}, args...)
	default:
		f.t.Fatalf("ran %q, want every command through lvm (or dmsetup, thin_dump, thin_delta)", name)
	}
	if len(f.steps) == 0 {
		f.t.Fatalf("unexpected command: %s %s", name, strings.Join(args, " "))
	}
	s := f.steps[0]
	f.steps = f.steps[1:]
	if !slices.Equal(got, s.args) {
		f.t.Fatalf("command:\n got lvm %s\nwant lvm %s", strings.Join(got, " "), strings.Join(s.args, " "))
	}
	out := []byte(readAt(f.t, s.out, ".json"))
	if s.stderr != "" && s.cut {
		return out, &runner.Error{Name: name, Args: args, ExitCode: -1, Stderr: s.stderr, Err: context.DeadlineExceeded}
	}
	if s.stderr != "" {
		return out, &runner.Error{Name: name, Args: args, ExitCode: 5,
			Stderr: readAt(f.t, s.stderr, ".stderr"), Err: errors.New("exit status 5")}
	}
	return out, nil
}

// readAt resolves "@name" to the content of testdata/name+ext.
func readAt(t *testing.T, s, ext string) string {
	t.Helper()
	if !strings.HasPrefix(s, "@") {
		return s
	}
	return string(fixture(t, s[1:]+ext))
}

func fixture(t testing.TB, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Report command lines as the Client builds them.
func pvsArgs(extra ...string) []string {
	return append([]string{"pvs"}, append(reportArgs(pvFields), extra...)...)
}
func vgsArgs(extra ...string) []string {
	return append([]string{"vgs"}, append(reportArgs(vgFields), extra...)...)
}
func lvsArgs(extra ...string) []string {
	return append([]string{"lvs"}, append(reportArgs(lvFields), extra...)...)
}
