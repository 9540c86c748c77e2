package runner

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A data command outlives the metadata timeout: only its own deadline
// bounds it.
func TestDataWorkOutlivesTimeout(t *testing.T) {
	ctx, cancel := DataWork(context.Background(), time.Minute)
	defer cancel()
	if _, err := New(100*time.Millisecond).Run(ctx, "sleep", "0.5"); err != nil {
		t.Fatalf("data command cut: %v", err)
	}
	cmd := New(100*time.Millisecond).AsExecInterface().CommandContext(ctx, "sleep", "0.5")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("data command through AsExecInterface cut: %v: %s", err, out)
	}
}

func TestDataWorkDeadline(t *testing.T) {
	ctx, cancel := DataWork(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := New(time.Hour).Run(ctx, "sleep", "10")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the data deadline", err)
	}
	_, err = New(time.Hour).AsExecInterface().CommandContext(ctx, "sleep", "10").CombinedOutput()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AsExecInterface: err = %v, want the data deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v: the data deadline did not stop the command", d)
	}
}

// The class stays with the one context: commands on a context derived from
// it (the lvm commands around a wipe) keep the metadata timeout.
func TestDataClassDoesNotLeakToDerivedContexts(t *testing.T) {
	dctx, cancel := DataWork(context.Background(), time.Hour)
	defer cancel()
	derived, cancel2 := context.WithCancel(dctx)
	defer cancel2()
	if _, err := New(100*time.Millisecond).Run(derived, "sleep", "10"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the metadata timeout", err)
	}
	if _, err := New(100*time.Millisecond).AsExecInterface().Command("sleep", "10").CombinedOutput(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Command without a data context: err = %v, want the metadata timeout", err)
	}
}

func TestDataBudget(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want time.Duration
	}{
		{-1, DataFloor},
		{0, DataFloor},
		{1 << 30, DataFloor + 128*time.Second},
		{1 << 40, DataFloor + 131072*time.Second},
	} {
		if got := DataBudget(tc.n); got != tc.want {
			t.Errorf("DataBudget(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
}
