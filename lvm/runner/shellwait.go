package runner

import (
	"context"
	"time"
)

// Waiting for a busy shell.
//
// A command that finds every shell busy could run as a process at once, as
// the pool did first, but in a burst that throws the shells' gain away:
// in the test VM a process of lvm2 costs about 0.6 s and a command in a
// shell about 0.15 s, so with 16 operations at once on 4 shells, 12 of
// every 16 commands paid the process. Instead it waits for a shell to be
// released, but no longer than an lvm2 process has been taking on this
// machine (the mean of the last ones, processCost): where processes are
// cheap the wait is short, where they are dear a shell is worth a wait.
//
// The bound is what keeps the wait safe. Carve holds an lvm2 VG lock of
// its own around some commands (lvm.Client's lockVGShared), so every
// shell may be busy with a command that waits for a lock whose holder's
// next command is the one waiting here; unbounded, that would be a
// deadlock. After the bound the command runs as a process, as before.

// waitState is the pool's record for waiters, guarded by Shell.mu.
type waitState struct {
	// freed is closed, and forgotten, when a shell is released, stops or
	// fails to start: a waiter then tries again. Made by the first waiter.
	freed chan struct{}
	// processCost is the moving mean of the lvm2 processes run beside the
	// shells (commands the shells could not carry or that found them busy).
	processCost time.Duration
}

// defaultProcessCost bounds the wait until a process has been timed.
const defaultProcessCost = 100 * time.Millisecond

// maxShellWait caps the bound, whatever processes have cost.
const maxShellWait = 5 * time.Second

// freedLocked is the channel closed at the next release.
func (s *Shell) freedLocked() <-chan struct{} {
	if s.waiting.freed == nil {
		s.waiting.freed = make(chan struct{})
	}
	return s.waiting.freed
}

// signalFreedLocked wakes the waiters.
func (s *Shell) signalFreedLocked() {
	if s.waiting.freed != nil {
		close(s.waiting.freed)
		s.waiting.freed = nil
	}
}

// waitBound is how long a command may wait for a busy shell.
func (s *Shell) waitBound() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiting.processCost == 0 {
		return defaultProcessCost
	}
	return min(s.waiting.processCost, maxShellWait)
}

// noteProcess records how long an lvm2 process took, for waitBound: a
// moving mean that gives the newest a quarter of the weight.
func (s *Shell) noteProcess(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiting.processCost == 0 {
		s.waiting.processCost = d
		return
	}
	s.waiting.processCost += (d - s.waiting.processCost) / 4
}

// waitFreed waits for freed until deadline or the caller's context; false
// when the time is up.
func waitFreed(ctx context.Context, freed <-chan struct{}, deadline time.Time) bool {
	wait := time.Until(deadline)
	if wait <= 0 {
		return false
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-freed:
		return true
	case <-timer.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// processKey marks a context whose lvm2 commands must run as processes.
type processKey struct{}

// AsProcess is ctx for lvm2 commands that must not run in a shell: a
// command that relies on a device-scan setting given in its own --config.
// A shell sets its device filters up when it starts and keeps what it
// learnt of the devices between commands, so such a setting cannot be
// trusted to reach the scan there. Seen in the VM's lifecycle suite: with
// Carve's layer suspended for a thick snapshot's frozen point, the next
// lvm2 command, run in a shell with devices/ignore_suspended_devices=1,
// hung in the kernel past its deadline and could not exit (exit_aio, its
// read of the suspended layer held) until a resume that its own caller
// would only send after it. The same command as a process skips the layer
// (the crash and lifecycle suites ran it so for days).
func AsProcess(ctx context.Context) context.Context {
	return context.WithValue(ctx, processKey{}, true)
}

// RunsAsProcess tells whether ctx is one of AsProcess.
func RunsAsProcess(ctx context.Context) bool { return ctx.Value(processKey{}) != nil }
