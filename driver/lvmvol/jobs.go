package lvmvol

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/metrics"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// Background data work.
//
// Copies (into a thick snapshot, a clone, a restored volume) and wipes take
// time in proportion to the volume: hours for a large one. They run as jobs
// of this process, keyed by what they do and the LV they write, so that:
//   - a retry joins the running job instead of starting a second one;
//   - a delete can stop a copy into the LV it deletes;
//   - a caller need not wait: with Config.BackgroundDataWork, a call that
//     starts long work waits a short grace (small volumes finish in one
//     call) and otherwise answers ErrDataPending; the caller calls again.
//
// What a job has achieved is recorded in LV tags, never only here (see
// progress.go): after a restart the jobs are gone, and the next call finds
// the copying or deleting tag and starts a job anew, which resumes from the
// recorded progress. A job that failed is kept until a caller has been
// told its error (await), so that a failure is reported once instead of
// being retried silently for ever; the call after that starts afresh.
type jobs struct {
	mu  sync.Mutex
	all map[string]*job
}

// Kinds of jobs, part of their key: a wipe of an LV must not be mistaken
// for a copy into it.
const (
	jobSnapshotCopy = "snapshot-copy"
	jobCopyIn       = "copy"
	jobWipe         = "wipe"
)

func jobKey(kind, vg, lv string) string { return kind + ":" + vg + "/" + lv }

// jobWork is what a job of key does, as carve_background_jobs counts it:
// copy or wipe.
func jobWork(key string) string {
	if strings.HasPrefix(key, jobWipe+":") {
		return "wipe"
	}
	return "copy"
}

type job struct {
	done   chan struct{}
	err    error // set before done is closed
	cancel context.CancelFunc
	meter  meter
	kept   bool // stays after a success until awaited (startKept)
}

// meter counts the bytes of a job done so far (read while it runs).
type meter struct {
	done, total atomic.Int64
}

// set records done bytes; a nil meter is fine.
func (m *meter) set(done int64) {
	if m != nil {
		m.done.Store(done)
	}
}

// start returns the job of key: the one running, or one that failed and
// whose error no caller has been told yet; otherwise it starts fn in the
// background, bounded by budget, and started is true.
func (js *jobs) start(key string, total int64, budget time.Duration, fn func(ctx context.Context, m *meter) error) (j *job, started bool) {
	return js.startJob(key, total, budget, false, fn)
}

// startKept is start for work whose success nothing else records: a
// catch-up, whose volume is settled before and after it. Its job stays
// once it succeeded too, until a caller is told (await), as a failed one
// does; forgotten at once, the caller's next call found no job and no
// mark of the work done, and started it again, for ever.
func (js *jobs) startKept(key string, total int64, budget time.Duration, fn func(ctx context.Context, m *meter) error) (j *job, started bool) {
	return js.startJob(key, total, budget, true, fn)
}

func (js *jobs) startJob(key string, total int64, budget time.Duration, kept bool, fn func(ctx context.Context, m *meter) error) (j *job, started bool) {
	js.mu.Lock()
	defer js.mu.Unlock()
	if j, ok := js.all[key]; ok {
		return j, false
	}
	if js.all == nil {
		js.all = map[string]*job{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	j = &job{done: make(chan struct{}), cancel: cancel, kept: kept}
	j.meter.total.Store(total)
	js.all[key] = j
	go js.run(ctx, key, j, fn)
	return j, true
}

// run does the work, then forgets a job that succeeded; a failed one stays
// until await reports it (or stop drops it). carve_background_jobs counts
// it while fn runs.
func (js *jobs) run(ctx context.Context, key string, j *job, fn func(ctx context.Context, m *meter) error) {
	defer j.cancel()
	metrics.BackgroundJob(jobWork(key), 1)
	err := fn(ctx, &j.meter)
	metrics.BackgroundJob(jobWork(key), -1)
	switch {
	case err != nil && errors.Is(ctx.Err(), context.Canceled):
		klog.InfoS("Background data work stopped", "job", key)
	case err != nil:
		klog.ErrorS(err, "Background data work failed; its caller is told, and the call after retries", "job", key)
	}
	js.mu.Lock()
	defer js.mu.Unlock()
	j.err = err
	if err == nil && !j.kept {
		js.forget(key, j)
	}
	close(j.done)
}

// forget drops j under key, if it is still the job there. js.mu is held.
func (js *jobs) forget(key string, j *job) {
	if js.all[key] == j {
		delete(js.all, key)
	}
}

// await waits for j up to wait (< 0: until it ends), or until ctx ends.
// finished tells whether it ended; a failed job is then forgotten, its
// error returned, so that the next start runs it afresh.
func (js *jobs) await(ctx context.Context, key string, j *job, wait time.Duration) (finished bool, err error) {
	var timeout <-chan time.Time
	if wait >= 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-j.done:
	default:
		select {
		case <-j.done:
		case <-timeout:
			return false, nil
		case <-ctx.Done():
			return false, nil
		}
	}
	js.mu.Lock()
	js.forget(key, j)
	js.mu.Unlock()
	return true, j.err
}

// stop cancels the job of key, if there is one, and waits for it to end.
func (js *jobs) stop(key string) {
	js.mu.Lock()
	j, ok := js.all[key]
	js.mu.Unlock()
	if !ok {
		return
	}
	j.cancel()
	<-j.done
	js.mu.Lock()
	js.forget(key, j)
	js.mu.Unlock()
}

// awaitData waits for job j (started or joined as key) as the Manager is
// configured; unfinished, it answers a *PendingError about work on lv.
// Only the call that started the job waits the grace: a retry that finds
// it running answers at once, so that it holds no caller's worker.
func (m *Manager) awaitData(ctx context.Context, key, work string, lv lvm.LV, j *job, started bool) error {
	// Standalone: the work goes on however long, and so does the call
	// (the CO giving up must not cut a copy or wipe short each time).
	wait := time.Duration(-1)
	if !m.background {
		ctx = context.WithoutCancel(ctx)
	} else {
		wait = 0
		if started {
			wait = m.dataGrace
		}
	}
	finished, err := m.jobs.await(ctx, key, j, wait)
	if !finished {
		return &volume.PendingError{Work: work, LV: lv.VGName + "/" + lv.Name, Done: j.meter.done.Load(), Total: j.meter.total.Load()}
	}
	return err
}
