package runner

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2"
)

// These tests start real processes (sh, true, sleep): the runner's job is
// exactly what a fake could not show.

func TestRunReturnsStdout(t *testing.T) {
	out, err := New(0).Run(context.Background(), "sh", "-c", "echo out; echo err >&2")
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "out\n" {
		t.Errorf("stdout = %q, want only stdout", out)
	}
}

func TestRunDoesNotUseAShell(t *testing.T) {
	out, err := New(0).Run(context.Background(), "echo", "$HOME;", "`id`", "a b")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), "$HOME; `id` a b\n"; got != want {
		t.Errorf("stdout = %q, want arguments passed verbatim %q", got, want)
	}
}

func TestRunFailureIsError(t *testing.T) {
	_, err := New(0).Run(context.Background(), "sh", "-c", `echo "  first line" >&2; echo "  second" >&2; exit 5`)
	var rerr *Error
	if !errors.As(err, &rerr) {
		t.Fatalf("err = %T %v, want *Error", err, err)
	}
	if rerr.ExitCode != 5 || rerr.Name != "sh" || rerr.Args[0] != "-c" {
		t.Errorf("Error = %+v", rerr)
	}
	if !strings.Contains(rerr.Stderr, "  first line\n") {
		t.Errorf("Stderr = %q, want it verbatim", rerr.Stderr)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, `sh -c "echo \"  first line\"`) ||
		!strings.HasSuffix(msg, ": exit status 5: first line; second") {
		t.Errorf("Error() = %q", msg)
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		t.Errorf("Unwrap does not reach *exec.ExitError")
	}
}

func TestRunMissingBinary(t *testing.T) {
	_, err := New(0).Run(context.Background(), "carve-no-such-binary")
	var rerr *Error
	if !errors.As(err, &rerr) || rerr.ExitCode != -1 || !errors.Is(err, exec.ErrNotFound) {
		t.Fatalf("err = %v, want *Error with exit -1 wrapping exec.ErrNotFound", err)
	}
}

func TestRunTimeout(t *testing.T) {
	start := time.Now()
	_, err := New(100*time.Millisecond).Run(context.Background(), "sleep", "10")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v: the timeout did not stop the command", d)
	}
}

func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := New(0).Run(ctx, "true")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestRunEnv(t *testing.T) {
	t.Setenv("CARVE_TEST_INHERITED", "yes")
	out, err := New(0, "CARVE_TEST_EXTRA=1", "CARVE_TEST_INHERITED=overridden").Run(context.Background(),
		"sh", "-c", `echo "$CARVE_TEST_EXTRA $CARVE_TEST_INHERITED"; test -n "$PATH"`)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "1 overridden\n" {
		t.Errorf("env seen by the command: %q", out)
	}
}

func TestDefaultTimeout(t *testing.T) {
	if got := (&Exec{}).timeout(); got != DefaultTimeout {
		t.Errorf("zero Timeout = %v, want %v", got, DefaultTimeout)
	}
}

func TestTrimStderr(t *testing.T) {
	long := strings.Repeat("x", 2000)
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"  one\n\n  two  \n", "one; two"},
		{long, long[:maxStderrInMessage] + "..."},
	} {
		if got := TrimStderr(tc.in); got != tc.want {
			t.Errorf("TrimStderr(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCommandLine(t *testing.T) {
	got := CommandLine("lvm", []string{"lvcreate", "-n", "x", "--addtag", "a b", "", `q"`})
	want := `lvm lvcreate -n x --addtag "a b" "" "q\""`
	if got != want {
		t.Errorf("CommandLine = %s, want %s", got, want)
	}
}

func TestObserveSeesEveryCommand(t *testing.T) {
	type seen struct {
		name string
		args []string
		ok   bool
	}
	var got []seen
	e := New(0)
	e.Observe = func(name string, args []string, d time.Duration, err error) {
		if d <= 0 {
			t.Errorf("%s: duration %v", name, d)
		}
		got = append(got, seen{name, args, err == nil})
	}
	_, _ = e.Run(context.Background(), "true", "a")
	_, _ = e.Run(context.Background(), "false")
	if len(got) != 2 || got[0].name != "true" || got[0].args[0] != "a" || !got[0].ok || got[1].name != "false" || got[1].ok {
		t.Errorf("observed %+v, want true (ok) then false (failed)", got)
	}
}

// RunInput hands its input to the command's stdin, and to nothing else:
// neither the log lines nor the error of a failed command hold it.
func TestRunInputReachesOnlyStdin(t *testing.T) {
	const secret = "s3cret-input-7f1c"
	out, err := New(0).RunInput(context.Background(), []byte(secret), "cat")
	if err != nil || string(out) != secret {
		t.Fatalf("cat = %q, %v; want the input back", out, err)
	}
	logs := captureLogs(t)
	_, err = New(0).RunInput(context.Background(), []byte(secret), "sh", "-c", "cat >/dev/null; echo failed >&2; exit 2")
	var rerr *Error
	if !errors.As(err, &rerr) || rerr.ExitCode != 2 {
		t.Fatalf("err = %v, want *Error with exit 2", err)
	}
	if strings.Contains(err.Error(), secret) || strings.Contains(fmt.Sprintf("%+v", rerr), secret) {
		t.Errorf("the error holds the input: %v", err)
	}
	if got := logs(); !strings.Contains(got, "failed") || strings.Contains(got, secret) {
		t.Errorf("log = %q: want the failure logged, without the input", got)
	}
}

// captureLogs sends klog's output, at the verbosity that logs every
// command and its stderr, to a buffer for this test; logs reads it.
func captureLogs(t *testing.T) (logs func() string) {
	var buf syncBuffer
	fset := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fset)
	for k, v := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "v": "5"} {
		if err := fset.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	klog.SetOutput(&buf)
	t.Cleanup(func() {
		klog.SetOutput(os.Stderr)
		_ = fset.Set("logtostderr", "true")
		_ = fset.Set("v", "0")
	})
	return func() string { klog.Flush(); return buf.String() }
}

// syncBuffer is a bytes.Buffer klog may write from its flush goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// LookupEnv answers what a command of the runner sees: Env's last entry
// for the key wins over an earlier one and over this process's.
func TestLookupEnvIsWhatTheCommandsSee(t *testing.T) {
	t.Setenv("CARVE_RUNNER_TEST", "process")
	e := New(0, "CARVE_RUNNER_TEST=first", "OTHER=x", "CARVE_RUNNER_TEST=last")
	out, err := e.Run(context.Background(), "sh", "-c", "printf %s \"$CARVE_RUNNER_TEST\"")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := e.LookupEnv("CARVE_RUNNER_TEST"); !ok || v != string(out) {
		t.Errorf("LookupEnv: %q, %t; the command saw %q", v, ok, out)
	}
	if v, ok := New(0).LookupEnv("CARVE_RUNNER_TEST"); !ok || v != "process" {
		t.Errorf("without Env: %q, %t; want this process's", v, ok)
	}
	if _, ok := e.LookupEnv("CARVE_RUNNER_TEST_UNSET"); ok {
		t.Error("an unset key found")
	}
}
