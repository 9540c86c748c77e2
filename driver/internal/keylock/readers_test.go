package keylock

import (
	"context"
	"errors"
	"testing"
)

var errGone = errors.New("gone")

func TestStopCancelsReadsWithItsCause(t *testing.T) {
	var r Readers
	ctx, done, err := r.Read(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	other, doneOther, err := r.Read(context.Background(), "b")
	if err != nil {
		t.Fatal(err)
	}
	defer doneOther()
	resume := r.Stop("a", errGone)
	if !errors.Is(context.Cause(ctx), errGone) {
		t.Errorf("read of a: cause %v, want errGone", context.Cause(ctx))
	}
	if other.Err() != nil {
		t.Errorf("read of b cancelled by a Stop of a: %v", context.Cause(other))
	}
	// A read while the stop is in progress is refused; after resume it is
	// taken again.
	if _, _, err := r.Read(context.Background(), "a"); !errors.Is(err, errGone) {
		t.Errorf("read during Stop: %v, want errGone", err)
	}
	resume()
	resume() // once only
	ctx2, done2, err := r.Read(context.Background(), "a")
	if err != nil || ctx2.Err() != nil {
		t.Fatalf("read after resume: %v %v", err, ctx2.Err())
	}
	done2()
	if ctx2.Err() == nil {
		t.Error("done left the read's context uncancelled")
	}
}

func TestOverlappingStops(t *testing.T) {
	var r Readers
	first := r.Stop("a", errGone)
	second := r.Stop("a", errors.New("second"))
	first()
	if _, _, err := r.Read(context.Background(), "a"); !errors.Is(err, errGone) {
		t.Errorf("read while a second Stop runs: %v, want the first's cause", err)
	}
	second()
	_, done, err := r.Read(context.Background(), "a")
	if err != nil {
		t.Fatalf("read after both resumed: %v", err)
	}
	done()
	if len(r.reads) != 0 || len(r.stopped) != 0 {
		t.Errorf("state left: reads %v, stopped %v", r.reads, r.stopped)
	}
}
