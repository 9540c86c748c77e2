package runner

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// TestRunStreamReadsWhileRunning: the reader sees the first line before
// the command has written the second, so the output is never held whole.
func TestRunStreamReadsWhileRunning(t *testing.T) {
	err := New(0).RunStream(context.Background(), func(r io.Reader) error {
		br := bufio.NewReader(r)
		first, err := br.ReadString('\n')
		if err != nil || first != "one\n" {
			return errors.New("first line: " + first)
		}
		rest, err := io.ReadAll(br)
		if err != nil || string(rest) != "two\n" {
			return errors.New("rest: " + string(rest))
		}
		return nil
	}, "sh", "-c", `echo one; read -t 1 x </dev/null; echo two; echo err >&2`)
	if err != nil {
		t.Fatal(err)
	}
}

// TestRunStreamStopsOnReadError: a reader that gives up stops the command
// (which would otherwise run on) and its error is the one returned.
func TestRunStreamStopsOnReadError(t *testing.T) {
	giveUp := errors.New("enough")
	start := time.Now()
	err := New(0).RunStream(context.Background(), func(r io.Reader) error {
		_, _ = r.Read(make([]byte, 1))
		return giveUp
	}, "sh", "-c", `echo x; exec sleep 30`)
	if !errors.Is(err, giveUp) {
		t.Fatalf("err = %v, want the reader's", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v: the command was not stopped", d)
	}
}

// TestRunStreamDrains: a reader that stops early without an error lets
// the command finish (its output drained) and succeed.
func TestRunStreamDrains(t *testing.T) {
	err := New(0).RunStream(context.Background(), func(io.Reader) error { return nil },
		"sh", "-c", `head -c 1000000 /dev/zero`)
	if err != nil {
		t.Fatal(err)
	}
}

// TestRunStreamCommandFailureWins: the command's failure (its stderr) is
// returned rather than the reader's complaint about a cut output.
func TestRunStreamCommandFailureWins(t *testing.T) {
	err := New(0).RunStream(context.Background(), func(r io.Reader) error {
		_, _ = io.ReadAll(r)
		return errors.New("output cut")
	}, "sh", "-c", `echo half; echo "bad metadata" >&2; exit 1`)
	var rerr *Error
	if !errors.As(err, &rerr) || rerr.ExitCode != 1 || !strings.Contains(rerr.Stderr, "bad metadata") {
		t.Fatalf("err = %v, want the command's *Error", err)
	}
}

// TestRunStreamTimeout: the metadata timeout bounds a streamed command too.
func TestRunStreamTimeout(t *testing.T) {
	err := New(100*time.Millisecond).RunStream(context.Background(), func(r io.Reader) error {
		_, err := io.ReadAll(r)
		return err
	}, "sleep", "10")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
}

// fakeRun is a Runner without RunStream.
type fakeRun struct{ out string }

func (f fakeRun) Run(context.Context, string, ...string) ([]byte, error) { return []byte(f.out), nil }

func TestStreamFallsBackToRun(t *testing.T) {
	var got string
	err := Stream(context.Background(), fakeRun{"all"}, func(r io.Reader) error {
		b, err := io.ReadAll(r)
		got = string(b)
		return err
	}, "x")
	if err != nil || got != "all" {
		t.Fatalf("got %q, %v", got, err)
	}
}
