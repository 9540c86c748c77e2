package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// Shell runs lvm2 commands in a small pool of long-lived lvm2 shells
// instead of a process each. Starting lvm and initialising lvm2 is much of
// what a metadata command costs on a slow machine (measured in the test VM,
// lvm2 2.03.16: an lvs 500-700 ms as a process, about 126 ms in a shell),
// and the shell pays it once.
//
// # Protocol
//
// `lvm` with no arguments is lvm2's shell: it reads one command a line on
// stdin and runs it in the same process. When stdin is not a terminal it
// prints no prompt, so nothing on stdout tells where a command's output
// ends, and it prints no exit status. What does, with no file of Carve's in
// /etc/lvm, is lvm2's command log, the way lvmdbusd (lvm2's D-Bus daemon)
// drives the shell:
//
//   - LVM_COMMAND_PROFILE names a command profile for the whole shell;
//     lvm2 installs one for exactly this, "lvmdbusd" (lvmdbusd.profile in
//     the profile directory, /etc/lvm/profile unless LVM_SYSTEM_DIR or
//     config/profile_dir moves it): reports in JSON (report/output_format,
//     which the shell fixes when it starts: a command's --reportformat is
//     ignored there) and a command log (log/report_command_log) showing
//     the shell's status row of each command. Its other settings (units in
//     bytes without suffix, times as Unix seconds, words for binary
//     fields, hidden LVs in brackets) are what Carve asks of every report
//     anyway. Neither setting can reach the shell another way: a shell
//     command's --config refuses both.
//   - LVM_REPORT_FD sends every report to a descriptor of its own (fd 3
//     here). After each command the shell writes there exactly one JSON
//     group: the command's report, if any, then its log, whose last row
//     (log_context "shell", log_type "status") names the command and holds
//     lvm2's return code, hence the process's exit status (ECMD_PROCESSED,
//     1, exits 0; a command line error 3, a failure 5). The group's closing
//     brace, alone on a line indented by two spaces, frames the command:
//     no sentinel command is needed. lvm2 escapes only the double quote
//     inside JSON values, so the group is read as text (shellproto.go), not
//     decoded. A report on stdout is the group without its log: byte for
//     byte what the process prints.
//   - With the command log on, lvm2 puts its messages (errors, warnings,
//     log_print's lines) into the log instead of printing them. After a
//     failed command `lastlog` returns them, and stderr is rebuilt from its
//     error and warning rows the way a process prints them (two spaces,
//     the message, a newline). A command that succeeded does not pay for
//     that: its messages are dropped (Run returns only stdout, and a report
//     on stdout is complete without them). What a command still writes to
//     stdout or stderr itself (getopt's complaints, a prompt) comes on the
//     shell's pipes; it was written before the group, so once the group
//     has arrived a non-blocking read takes all of it.
//   - A prompt ("...? [y/n]: " on stderr) reads its answer from the shell's
//     stdin, where a process of this runner reads end of file and takes
//     "n" (printing "[n]"): the shell gets "n" written for it.
//   - A line carries at most 63 words; quoting is by ' or " with no
//     escapes (shellLine). A command the shell cannot carry exactly, or one
//     outside shellCommands, runs as a process.
//
// What still differs from a process: a successful command's messages are
// not returned; a command line error lacks the process's last hint
// ("Run `lvcreate --help' for more information."); rebuilt stderr assumes
// lvm.conf's default log/prefix and puts what the command printed itself
// before its logged messages.
//
// # Cost
//
// On the host (lvm2 2.03.16, a loop device; BenchmarkLVS): an lvs of
// Carve's kind costs 52 ms as a process and 39 ms in a shell; a failure's
// lastlog adds about 1.3 ms. Most of both is not lvm2's work: lvm2 sets up
// an AIO context for every command and its io_destroy at the end waits for
// an RCU grace period, 30-40 ms here. With global/use_aio=0 in lvm.conf
// (read only when lvm2 starts, so not settable per command) the same lvs
// costs 11 ms as a process and 2 ms in a shell.
//
// # Deadlines, crashes, state
//
// A command keeps its deadline (Exec.Timeout, or its DataWork context).
// When the deadline passes the shell gets SIGTERM, then SIGKILL after
// killGrace, as a process does. Where lvm2 waits (for a lock, an answer)
// it catches SIGTERM and fails the command by itself: the shell then
// replies, and the caller gets that exit status with the context's error,
// as from a process that did the same (the shell is retired). Elsewhere
// lvm2 blocks signals inside its metadata updates, so SIGTERM ends the
// shell only between them; a shell that is gone, or killed after the
// grace, gives the same *Error as a cut process (ExitCode -1, Err the
// context's error), and the caller repairs as after any cut command. The
// process has exited before Run returns, so lvm2's locks are free for the
// repair. A shell that dies in the middle of a command (killed by someone
// else, crashed) fails the command as a process killed by a signal
// (ExitCode -1); a reply that breaks the protocol ends the shell the same
// way, since what the command did is then unknown. A new shell starts when
// one is next needed.
//
// Each shell runs one command at a time; a command that finds every shell
// busy runs as a process, so the pool never makes a caller wait for
// another caller's command (Carve holds lvm2's VG lock around some
// commands: a queue behind commands waiting for that lock could deadlock).
//
// lvm2 keeps little between the commands of one shell: it drops its
// metadata cache and label scan after each one, scans /dev again for the
// next and rereads lvm.conf when it changed; locks are taken and released
// per command (an idle shell, checked on the host, has only its pipes
// open). A device that disappears is missed by the shell's next command as
// by a process (checked: a detached loop device under a VG). What it keeps
// is its device cache with each device's size (forgotten only when a
// command releases a VG lock: the commands that size devices therefore run
// as processes, see shellCommands), the profile, and its memory (measured
// over 15,000 commands: heap mappings flat, resident memory up by about
// 400 bytes a command inside them), so a shell is retired after
// MaxCommands commands.
type Shell struct {
	// Size is the most shells at once.
	Size int
	// Profile is the command profile the shells run with: lvm2's own
	// "lvmdbusd" when empty.
	Profile string
	// MaxCommands retires a shell after so many commands (a fresh one
	// starts when needed); DefaultShellMaxCommands when zero.
	MaxCommands int

	mu      sync.Mutex
	idle    []*lvmShell
	running int  // started and not yet stopped
	closed  bool // Close was called
	// live holds every shell whose process has not exited, busy, idle or
	// being stopped; starting counts those still starting. Close waits
	// for both to empty.
	live     map[*lvmShell]struct{}
	starting int
	retryAt  time.Time // a shell failed to start: processes until then
	backoff  time.Duration
	nextID   int
	served   int // commands the shells ran
	waiting  waitState
}

// DefaultShellProfile is the command profile lvm2 installs for driving its
// shell (lvmdbusd.profile).
const DefaultShellProfile = "lvmdbusd"

// DefaultShellMaxCommands is how many commands one shell runs before it is
// replaced.
const DefaultShellMaxCommands = 1000

// shellRetry is how long commands run as processes after a shell failed
// to start (the profile is missing, the framing does not hold...); it
// doubles with every failure in a row, up to shellRetryMax.
const (
	shellRetry    = time.Minute
	shellRetryMax = time.Hour
)

// shellStartTimeout bounds a shell's start and first reply.
const shellStartTimeout = 30 * time.Second

// shellProbe is the command a new shell runs first: an unknown name, which
// lvm2 answers at once with a status row (return code 2, ENO_SUCH_CMD).
// Its reply shows that the profile was applied and the group framing holds.
const shellProbe = "carve_shell_probe"

// NewShell returns a pool of at most size lvm2 shells; set it as an
// Exec's Shell. Shells start when commands need them, with that Exec's
// environment.
func NewShell(size int) *Shell {
	return &Shell{Size: size}
}

// Close stops the idle shells now and busy ones when their command ends,
// and returns once every shell has exited; a shell still busy after
// ShellCloseWait is killed as a cut command is. Later commands run as
// processes.
//
// Why it waits: carve calls it on its way out, and a shell is carve's
// child. Left running, it would finish its command after carve is gone
// (as an lvm2 process would) but also hold carve's cgroup: a container
// runtime or a supervisor that removes the cgroup once carve has exited
// is refused (the VM faults suite saw that).
func (s *Shell) Close() error {
	s.mu.Lock()
	s.closed = true
	s.signalFreedLocked() // waiters run processes now
	idle := s.idle
	s.idle = nil
	s.running -= len(idle)
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, sh := range idle {
		wg.Go(sh.stop)
	}
	wg.Wait()
	s.awaitExits(time.Now().Add(ShellCloseWait))
	return nil
}

// ShellCloseWait is how long Close lets busy shells finish their command.
// It is shorter than a pod's default grace period (30 s), so that carve
// ends its shells itself before the runtime's SIGKILL.
const ShellCloseWait = 20 * time.Second

// awaitExits waits until no shell is starting or alive; at deadline it
// kills those left.
func (s *Shell) awaitExits(deadline time.Time) {
	for {
		s.mu.Lock()
		left := make([]*lvmShell, 0, len(s.live))
		for sh := range s.live {
			left = append(left, sh)
		}
		starting := s.starting
		s.mu.Unlock()
		if len(left) == 0 && starting == 0 {
			return
		}
		if len(left) > 0 && time.Now().After(deadline) {
			klog.InfoS("Killing lvm shells still busy at close", "shells", len(left))
			var wg sync.WaitGroup
			for _, sh := range left {
				wg.Go(sh.kill)
			}
			wg.Wait()
			continue
		}
		time.Sleep(closePoll)
	}
}

// closePoll is how often Close looks for shells that have exited.
const closePoll = 10 * time.Millisecond

// acquire returns an idle shell, or a new one when there is room, or nil:
// run a process then. When every shell is busy it waits for one to be
// released, but no longer than a process would take (shellwait.go).
func (s *Shell) acquire(ctx context.Context, env []string) *lvmShell {
	var deadline time.Time
	for {
		sh, start, freed := s.take()
		if sh != nil {
			return sh
		}
		if start {
			return s.start(ctx, env)
		}
		if freed == nil {
			return nil
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(s.waitBound())
		}
		if !waitFreed(ctx, freed, deadline) {
			return nil
		}
	}
}

// take pops a live idle shell, or says that a new one may start (start,
// counted as running already), or returns the channel closed when a busy
// one is next released (freed; nil when no shell can be had: the pool is
// closed, or shells failed to start lately).
func (s *Shell) take() (sh *lvmShell, start bool, freed <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.idle) > 0 {
		sh := s.idle[len(s.idle)-1]
		s.idle = s.idle[:len(s.idle)-1]
		if !sh.exited() {
			return sh, false, nil
		}
		s.running--
		klog.V(2).InfoS("An idle lvm shell had exited; replacing it", "shell", sh.id, "err", sh.waitErr)
		go sh.kill()
	}
	if s.closed || s.Size <= 0 || time.Now().Before(s.retryAt) {
		return nil, false, nil
	}
	if s.running < s.Size {
		s.running++
		s.starting++
		return nil, true, nil
	}
	return nil, false, s.freedLocked()
}

// start starts a shell for a caller that take let start one.
func (s *Shell) start(ctx context.Context, env []string) *lvmShell {
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	profile := s.Profile
	s.mu.Unlock()

	if profile == "" {
		profile = DefaultShellProfile
	}
	sh, err := startShell(ctx, id, profile, env)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starting--
	if err != nil {
		s.running--
		s.signalFreedLocked() // room for another start
		if ctx.Err() != nil {
			return nil // the caller's time ran out, not the shell's fault
		}
		s.backoff = min(max(2*s.backoff, shellRetry), shellRetryMax)
		s.retryAt = time.Now().Add(s.backoff)
		// An error, not information: every command then pays a process
		// start, which on a busy node is most of its time.
		klog.ErrorS(err, "An lvm shell did not start; lvm commands run as processes for a while", "retryIn", s.backoff,
			"hint", shellStartHint(err, profile))
		return nil
	}
	s.backoff = 0
	s.track(sh)
	klog.V(2).InfoS("Started an lvm shell", "shell", id, "pid", sh.cmd.Process.Pid)
	return sh
}

// shellStartHint says what to do about a shell that did not start. The
// usual cause on a node is a command profile missing from the host's
// /etc/lvm/profile (the node plugin shares the host's /etc/lvm), which
// lvm2's package installs.
func shellStartHint(err error, profile string) string {
	if strings.Contains(err.Error(), "Failed to apply command profile") {
		return fmt.Sprintf("lvm2's command profile %s.profile is missing from the profile directory (/etc/lvm/profile): "+
			"reinstall the host's lvm2 package, which installs it", profile)
	}
	return "see the error; lvm2's shell runs as `lvm` with LVM_COMMAND_PROFILE=" + profile
}

// track counts sh as live until its process has exited. Called under mu.
func (s *Shell) track(sh *lvmShell) {
	if s.live == nil {
		s.live = make(map[*lvmShell]struct{})
	}
	s.live[sh] = struct{}{}
	go func() {
		<-sh.done
		s.mu.Lock()
		delete(s.live, sh)
		s.mu.Unlock()
	}()
}

// release takes a shell back after a command: idle again if it is healthy,
// else stopped.
func (s *Shell) release(sh *lvmShell, healthy bool) {
	maxCommands := s.MaxCommands
	if maxCommands <= 0 {
		maxCommands = DefaultShellMaxCommands
	}
	s.mu.Lock()
	s.signalFreedLocked()
	if healthy && !s.closed && !sh.exited() && sh.commands < maxCommands {
		s.idle = append(s.idle, sh)
		s.mu.Unlock()
		return
	}
	s.running--
	s.mu.Unlock()
	// Off the caller's path: a cut or dead shell has exited already, and
	// one retired or interrupted has finished its command.
	if healthy {
		go sh.stop()
	} else {
		go sh.kill()
	}
}

// shellResult is a command's outcome in a shell: lvm2's exit status with
// stdout and stderr, or err when the shell failed it (the deadline cut it,
// the shell died, the reply broke the protocol).
type shellResult struct {
	stdout []byte
	stderr string
	code   int
	err    error
}

// run runs `lvm args...` in a shell; ok is false when it did not (no shell
// to run it: run a process).
func (s *Shell) run(ctx context.Context, env []string, args []string) (res shellResult, ok bool) {
	line, carried := shellLine(args)
	if !carried || ctx.Err() != nil {
		// A process fails at once with the context's error, as it
		// always did.
		return res, false
	}
	sh := s.acquire(ctx, env)
	if sh == nil {
		return res, false
	}
	res, healthy, sent := sh.run(ctx, args[0], line)
	if sent {
		s.mu.Lock()
		s.served++
		s.mu.Unlock()
	}
	s.release(sh, healthy)
	return res, sent
}

// lvmShell is one `lvm` shell process.
type lvmShell struct {
	id     int
	cmd    *exec.Cmd
	stdin  *os.File
	out    *capture    // the shell's own stdout
	errs   *capture    // its stderr
	report *os.File    // LVM_REPORT_FD's read end
	groups chan string // one JSON report group per command
	done   chan struct{}
	// waitErr is the process's exit, set before done closes.
	waitErr  error
	quit     chan struct{} // closed when the shell is stopped or killed
	quitOnce sync.Once
	commands int // commands run, the probe not counted
}

// startShell starts a shell and checks its first reply.
func startShell(ctx context.Context, id int, profile string, env []string) (*lvmShell, error) {
	var files []*os.File // pipe ends the child gets; closed here after Start
	var ours []*os.File  // our ends, closed if the start fails
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, err
	}
	files, ours = append(files, inR), append(ours, inW)
	outR, outW, err := pipe()
	if err == nil {
		files, ours = append(files, outW), append(ours, outR)
	}
	var errR, errW, repR, repW *os.File
	if err == nil {
		errR, errW, err = pipe()
		if err == nil {
			files, ours = append(files, errW), append(ours, errR)
		}
	}
	if err == nil {
		repR, repW, err = pipe()
		if err == nil {
			files, ours = append(files, repW), append(ours, repR)
		}
	}
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			_ = f.Close()
		}
	}
	if err != nil {
		closeAll(files)
		closeAll(ours)
		return nil, err
	}

	cmd := exec.Command(lvmBinary)
	// A copy: env is the runner's, shared by every start, and an append
	// into its spare capacity would write under another start.
	cmd.Env = append(slices.Clone(env),
		"LVM_COMMAND_PROFILE="+profile,
		"LVM_REPORT_FD=3", // ExtraFiles[0]
		// The shell would read ~/.lvm_history when it starts and write
		// it after every command, and its line editor reads ~/.editrc
		// (key bindings); none of that has a place here.
		"HOME=/dev/null", "EDITRC=/dev/null",
	)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.ExtraFiles = []*os.File{repW}
	err = cmd.Start()
	closeAll(files)
	if err != nil {
		closeAll(ours)
		return nil, err
	}
	sh := &lvmShell{
		id: id, cmd: cmd, stdin: inW, report: repR,
		groups: make(chan string, 1), done: make(chan struct{}), quit: make(chan struct{}),
	}
	sh.out, err = newCapture(outR, false)
	if err == nil {
		sh.errs, err = newCapture(errR, true)
	}
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		closeAll(ours)
		return nil, err
	}
	go func() {
		sh.waitErr = cmd.Wait()
		close(sh.done)
	}()
	go sh.out.loop()
	go sh.errs.loop()
	go sh.readGroups()

	pctx, cancel := context.WithTimeout(ctx, shellStartTimeout)
	defer cancel()
	if err := sh.send(shellProbe); err != nil {
		sh.kill()
		return nil, fmt.Errorf("lvm shell: %w: %s", err, TrimStderr(string(sh.errs.take())))
	}
	g, _, err := sh.await(pctx)
	if err != nil {
		sh.kill()
		return nil, fmt.Errorf("lvm shell: %w: %s", err, TrimStderr(string(sh.errs.take())))
	}
	if name, ret, ok := shellStatus(logRows(g)); !ok || name != shellProbe || ret != 2 {
		sh.kill()
		return nil, fmt.Errorf("lvm shell: unexpected first reply %q: %s", g, TrimStderr(string(sh.errs.take())))
	}
	if out, errs := sh.out.take(), sh.errs.take(); len(out)+len(errs) > 0 {
		klog.V(2).InfoS("An lvm shell's output as it started", "shell", id, "stdout", string(out), "stderr", string(errs))
	}
	return sh, nil
}

// readGroups frames the report descriptor's stream into groups.
func (sh *lvmShell) readGroups() {
	defer close(sh.groups)
	var buf []byte
	chunk := make([]byte, 64<<10)
	for {
		n, err := sh.report.Read(chunk)
		buf = append(buf, chunk[:n]...)
		for {
			i := bytes.Index(buf, []byte(groupEnd))
			if i < 0 {
				break
			}
			g := string(buf[:i+len(groupEnd)])
			buf = buf[i+len(groupEnd):]
			select {
			case sh.groups <- g:
			case <-sh.quit:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (sh *lvmShell) send(line string) error {
	_, err := io.WriteString(sh.stdin, line+"\n")
	return err
}

func (sh *lvmShell) exited() bool {
	select {
	case <-sh.done:
		return true
	default:
		return false
	}
}

// errShellExited is a shell that ended in the middle of a command.
var errShellExited = errors.New("lvm shell exited")

// await waits for the next report group. When ctx ends first the shell is
// treated as a process cut at its deadline: SIGTERM, then SIGKILL after
// killGrace. lvm2 catches SIGTERM where it waits (for a lock, a prompt's
// answer) and ends the command by itself, as a failure: the group then
// arrives and is returned with interrupted set, as exec's Wait returns a
// cut process's own exit status. Otherwise the signal ends the shell, and
// the error is ctx's. A shell that dies fails with errShellExited.
func (sh *lvmShell) await(ctx context.Context) (g string, interrupted bool, err error) {
	var grace <-chan time.Time
	for {
		select {
		case g, ok := <-sh.groups:
			if !ok {
				sh.kill()
				if grace != nil {
					return "", true, ctx.Err()
				}
				return "", false, sh.deathError()
			}
			return g, grace != nil, nil
		case <-sh.errs.prompt:
			// As a process reading end of file on stdin would; a
			// process prints "[n]" then.
			sh.errs.note("[n]\n")
			if err := sh.send(promptAnswer); err != nil {
				sh.kill()
				return "", grace != nil, sh.deathError()
			}
		case <-sh.done:
			// A reply written just before the end is the reply.
			select {
			case g, ok := <-sh.groups:
				if ok {
					return g, grace != nil, nil
				}
			case <-time.After(10 * time.Millisecond):
			}
			sh.kill()
			if grace != nil {
				return "", true, ctx.Err()
			}
			return "", false, sh.deathError()
		case <-ctx.Done():
			// A reply that came with the deadline is the reply.
			select {
			case g, ok := <-sh.groups:
				if ok {
					return g, false, nil
				}
			default:
			}
			_ = sh.cmd.Process.Signal(syscall.SIGTERM)
			grace = time.After(killGrace)
			ctx = doneContext{ctx}
		case <-grace:
			sh.killNow()
			return "", true, ctx.Err()
		}
	}
}

// promptAnswer is what a prompt is answered.
const promptAnswer = "n"

// awaitReply is await, skipping the reply to a prompt's answer that no
// prompt read (stderr ended like a prompt, but nothing was asking): the
// shell ran it as a command, "n", which is none of ours.
func (sh *lvmShell) awaitReply(ctx context.Context) (string, bool, error) {
	for {
		g, interrupted, err := sh.await(ctx)
		if err != nil {
			return g, interrupted, err
		}
		if name, _, ok := shellStatus(logRows(g)); ok && name == promptAnswer {
			klog.V(2).InfoS("An lvm shell ran a prompt's answer as a command", "shell", sh.id)
			continue
		}
		return g, interrupted, nil
	}
}

// doneContext is a context that has ended, whose Done no longer fires:
// await's loop goes on after the deadline without spinning on it.
type doneContext struct{ context.Context }

func (doneContext) Done() <-chan struct{} { return nil }

func (sh *lvmShell) deathError() error {
	<-sh.done
	if sh.waitErr != nil {
		return fmt.Errorf("%w: %w", errShellExited, sh.waitErr)
	}
	return errShellExited
}

// run runs one command line whose subcommand is sub. healthy tells whether
// the shell can run another one; sent is false when the line did not reach
// the shell (it had died while idle): the command did not run.
func (sh *lvmShell) run(ctx context.Context, sub, line string) (res shellResult, healthy, sent bool) {
	sh.commands++
	if left := sh.out.take(); len(left) > 0 {
		klog.V(4).InfoS("Output an lvm shell wrote between commands", "shell", sh.id, "stdout", string(left))
	}
	if left := sh.errs.take(); len(left) > 0 {
		klog.V(4).InfoS("Output an lvm shell wrote between commands", "shell", sh.id, "stderr", string(left))
	}
	fail := func(err error) (shellResult, bool, bool) {
		sh.kill()
		return shellResult{stdout: sh.out.take(), stderr: string(sh.errs.take()), code: -1, err: err}, false, true
	}
	if err := sh.send(line); err != nil {
		// A write to a pipe nobody reads fails at once: the shell had
		// exited, the command never started.
		klog.V(2).InfoS("An lvm shell was gone before its command; running a process", "shell", sh.id, "err", err)
		sh.kill()
		return res, false, false
	}
	g, interrupted, err := sh.awaitReply(ctx)
	if err != nil {
		return fail(err)
	}
	name, ret, ok := shellStatus(logRows(g))
	if !ok || name != sub {
		return fail(fmt.Errorf("lvm shell: unexpected reply to %s: %q", sub, g))
	}
	res.code = exitCode(ret)
	healthy = !interrupted // a shell that saw SIGTERM is retired
	if interrupted && res.code == 0 {
		// exec's Wait reports the context's error for a process that
		// exited 0 after its SIGTERM: it may have stopped short.
		res.code, res.err = -1, ctx.Err()
	}
	var logOut, logErr string
	if res.code > 0 {
		// The deadline may have passed: lastlog gets a moment of its own.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killGrace)
		if err := sh.send("lastlog"); err != nil {
			healthy = false
		} else if lg, _, err := sh.awaitReply(lctx); err != nil {
			// The command itself ended: its status stands, only its
			// messages are missing.
			healthy = false
		} else if rows := logRows(lg); shellName(rows) == sub {
			logOut, logErr = logMessages(rows)
		}
		cancel()
	}
	res.stdout = append(append(sh.out.take(), logOut...), reportPart(g)...)
	res.stderr = string(sh.errs.take()) + logErr
	return res, healthy, true
}

func (sh *lvmShell) stopReading() {
	sh.quitOnce.Do(func() { close(sh.quit) })
}

// kill ends the shell as the runner ends a cut process: SIGTERM, SIGKILL
// after killGrace. It returns once the process has exited.
func (sh *lvmShell) kill() {
	sh.stopReading()
	if !sh.exited() {
		_ = sh.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-sh.done:
		case <-time.After(killGrace):
			_ = sh.cmd.Process.Kill()
			<-sh.done
		}
	}
	sh.closeFiles()
}

// killNow kills the shell at once (its SIGTERM's grace is over).
func (sh *lvmShell) killNow() {
	sh.stopReading()
	_ = sh.cmd.Process.Kill()
	<-sh.done
	sh.closeFiles()
}

// stop ends an idle shell: end of file on its stdin ends lvm2's shell
// between commands; kill if it does not within killGrace.
func (sh *lvmShell) stop() {
	_ = sh.stdin.Close()
	select {
	case <-sh.done:
		sh.stopReading()
		sh.closeFiles()
	case <-time.After(killGrace):
		sh.kill()
	}
}

// closeFiles closes our ends of the pipes once the process has exited; the
// reading goroutines end with them.
func (sh *lvmShell) closeFiles() {
	_ = sh.stdin.Close()
	_ = sh.report.Close()
	sh.out.close()
	sh.errs.close()
}

// lvmBinary is the program the shell runs as: lvm2's multi-call binary,
// which is a shell when given no arguments.
const lvmBinary = "lvm"

// capture collects what a shell writes on one pipe. Its reads happen under
// mu, and take reads what is left in the pipe before it returns, so that
// what the shell wrote before some point (its report group arrived) is all
// in the result, never held by a read in flight.
type capture struct {
	f      *os.File
	rc     syscall.RawConn
	mu     sync.Mutex
	buf    []byte
	prompt chan struct{} // stderr: a prompt waits for an answer
	chunk  [4096]byte
}

func newCapture(f *os.File, prompts bool) (*capture, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	c := &capture{f: f, rc: rc}
	if prompts {
		c.prompt = make(chan struct{}, 1)
	}
	return c, nil
}

// promptSuffix ends every lvm2 prompt (yes_no_prompt).
const promptSuffix = "[y/n]: "

// readLocked reads once from fd, with mu held: false at end of file or on
// an error, and again (EAGAIN) with nothing to read.
func (c *capture) readLocked(fd uintptr) (more, again bool) {
	n, err := syscall.Read(int(fd), c.chunk[:])
	if n > 0 {
		c.buf = append(c.buf, c.chunk[:n]...)
		if c.prompt != nil && bytes.HasSuffix(c.buf, []byte(promptSuffix)) {
			select {
			case c.prompt <- struct{}{}:
			default:
			}
		}
		return true, false
	}
	switch err {
	case syscall.EAGAIN:
		return true, true
	case syscall.EINTR:
		return true, false
	}
	return false, false
}

// loop reads until end of file (or until close).
func (c *capture) loop() {
	for {
		more := true
		err := c.rc.Read(func(fd uintptr) bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			var again bool
			more, again = c.readLocked(fd)
			return !again
		})
		if err != nil || !more {
			return
		}
	}
}

// take returns what was written so far and forgets it.
func (c *capture) take() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drainLocked()
	b := c.buf
	c.buf = nil
	return b
}

// drainLocked reads what the pipe holds, without waiting.
func (c *capture) drainLocked() {
	_ = c.rc.Control(func(fd uintptr) {
		for {
			if more, again := c.readLocked(fd); !more || again {
				return
			}
		}
	})
}

// note adds text of our own (the "[n]" of an answered prompt).
func (c *capture) note(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = append(c.buf, s...)
}

// close keeps what the pipe still holds, then closes it.
func (c *capture) close() {
	c.mu.Lock()
	c.drainLocked()
	c.mu.Unlock()
	_ = c.f.Close()
}

// cause is why the command failed, as exec's Run would say it: nil, its
// exit status, or what cut it.
func (r shellResult) cause() error {
	if r.err != nil {
		return r.err
	}
	if r.code != 0 {
		return exitStatus(r.code)
	}
	return nil
}

// newError is the *Error newError makes for a process that failed the
// same way.
func (r shellResult) newError(ctxErr error, name string, args []string, cause error) *Error {
	e := &Error{Name: name, Args: args, ExitCode: r.code, Stderr: r.stderr, Err: cause}
	if r.err != nil {
		e.ExitCode = -1
	}
	if ctxErr != nil {
		e.Err = ctxErr
	}
	return e
}

// exitStatus is a non-zero exit status of a command run in a shell; it
// reads like *exec.ExitError's.
type exitStatus int

func (s exitStatus) Error() string { return "exit status " + strconv.Itoa(int(s)) }
