// Package runner is the one place where Carve starts external programs.
//
// Every command runs directly (never through a shell, so names and tags can
// never be interpreted as shell syntax), under a timeout, with a fixed extra
// environment, and with its stderr captured for error messages and logs.
// The timeout depends on the command's class (see data.go): a metadata
// command gets Exec.Timeout, a data command the deadline of the context
// DataWork gave it.
//
// With Exec.Shell set, lvm2 commands run instead in long-lived lvm2 shells
// (shell.go), lvm2's own command interpreter, not an operating system
// shell: an argument goes there only when lvm2's line splitting keeps it
// exactly as it is, else the command runs as a process.
package runner

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// DefaultTimeout bounds a metadata command when Exec.Timeout is zero. LVM
// commands take about a second even on a slow VM; two minutes only trips on
// a hang (a stuck device, a lock held by a dead process).
const DefaultTimeout = 2 * time.Minute

// killGrace is how long a command has to exit after SIGTERM before it is
// killed. lvm2 blocks signals inside metadata updates, so a SIGTERM lets it
// finish or back out cleanly where a SIGKILL could leave a lock behind.
const killGrace = 5 * time.Second

// Runner runs external commands.
type Runner interface {
	// Run executes name with args directly (never via a shell) and returns
	// stdout. On failure it returns *Error (stderr captured, exit code, the
	// command line); stdout is still returned when there was some.
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// Exec runs commands on this machine.
type Exec struct {
	// Timeout per metadata command; DefaultTimeout when zero. Data
	// commands are bounded by their context instead (DataWork).
	Timeout time.Duration
	// Env holds extra "K=V" entries appended to os.Environ().
	Env []string
	// Observe, when set, is told of every command that ran: the metrics
	// of how many commands Carve runs, and how long they take, hang here
	// (the runner sits below the packages that know about metrics).
	Observe func(name string, args []string, d time.Duration, err error)
	// Shell, when set, runs lvm2 commands (name "lvm") in long-lived lvm2
	// shells instead of a process each, with the same results, deadlines,
	// logs and errors (shell.go). Commands it cannot carry, and those that
	// find every shell busy, still run as processes.
	Shell *Shell
}

var _ Runner = (*Exec)(nil)

// New returns an Exec with the given timeout (DefaultTimeout when zero) and
// extra environment.
func New(timeout time.Duration, env ...string) *Exec {
	return &Exec{Timeout: timeout, Env: env}
}

func (e *Exec) timeout() time.Duration {
	if e.Timeout <= 0 {
		return DefaultTimeout
	}
	return e.Timeout
}

func (e *Exec) observe(name string, args []string, d time.Duration, err error) {
	if e.Observe != nil {
		e.Observe(name, args, d, err)
	}
}

func (e *Exec) environ(base []string) []string {
	env := make([]string, 0, len(base)+len(e.Env))
	env = append(env, base...)
	return append(env, e.Env...)
}

// LookupEnv is the value of key in the environment of e's commands: the
// last of Env's entries for it (exec keeps the last of duplicates), else
// this process's. Code that reads what those commands read (lvm2's
// LVM_SYSTEM_DIR) asks it instead of guessing.
func (e *Exec) LookupEnv(key string) (string, bool) {
	for i := len(e.Env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(e.Env[i], key+"="); ok {
			return v, true
		}
	}
	return os.LookupEnv(key)
}

// Run implements Runner.
func (e *Exec) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return e.run(ctx, nil, name, args...)
}

// RunInput is Run with input on the command's stdin. It is how a secret
// reaches a command (cryptsetup's --key-file=-): never as an argument, which
// the process table, logs and errors show, nor in the environment or a file.
// The input itself is never logged, counted or put into an *Error; only the
// command's own stderr is, so a command must not echo its input there.
func (e *Exec) RunInput(ctx context.Context, input []byte, name string, args ...string) ([]byte, error) {
	return e.run(ctx, bytes.NewReader(input), name, args...)
}

func (e *Exec) run(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
	if !isData(ctx) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.timeout())
		defer cancel()
	}

	if stdin == nil && e.Shell != nil && name == lvmBinary && !RunsAsProcess(ctx) {
		start := time.Now()
		if res, ok := e.Shell.run(ctx, e.environ(os.Environ()), args); ok {
			d := time.Since(start)
			cause := res.cause()
			logRun(name, args, d, cause, res.stderr)
			e.observe(name, args, d, cause)
			if cause != nil {
				return res.stdout, res.newError(ctx.Err(), name, args, cause)
			}
			return res.stdout, nil
		}
	}

	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = e.environ(os.Environ())
	setGracefulCancel(cmd)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr

	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if e.Shell != nil && name == lvmBinary && ctx.Err() == nil {
		e.Shell.noteProcess(d) // what a wait for a busy shell may cost
	}
	logRun(name, args, d, err, stderr.String())
	e.observe(name, args, d, err)
	if err != nil {
		return stdout.Bytes(), newError(ctx.Err(), name, args, err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// Streamer is a Runner that can also hand a command's stdout to its
// caller while the command runs, for output too large to hold (a thin
// pool's metadata dumped as XML: megabytes per terabyte mapped).
type Streamer interface {
	// RunStream runs name with args like Run and calls read with the
	// command's stdout as it comes. When read fails, the command is
	// stopped as a cancelled one is (SIGTERM, SIGKILL after a grace) and
	// read's error returned; when read returns nil, whatever output it
	// left is read and discarded. A failure of the command itself
	// (*Error, stderr captured) wins over read's error, which a cut
	// output usually causes.
	RunStream(ctx context.Context, read func(io.Reader) error, name string, args ...string) error
}

var _ Streamer = (*Exec)(nil)

// Stream runs a command through r with RunStream when r is a Streamer;
// otherwise (a test's fake Runner) it runs it with Run and hands read the
// whole output at once.
func Stream(ctx context.Context, r Runner, read func(io.Reader) error, name string, args ...string) error {
	if s, ok := r.(Streamer); ok {
		return s.RunStream(ctx, read, name, args...)
	}
	out, err := r.Run(ctx, name, args...)
	if err != nil {
		return err
	}
	return read(bytes.NewReader(out))
}

// RunStream implements Streamer. The command always runs as a process
// (never in an lvm2 shell), under the same timeout classes as Run's: a
// caller whose reader waits on a slow consumer runs it under DataWork.
func (e *Exec) RunStream(ctx context.Context, read func(io.Reader) error, name string, args ...string) error {
	if !isData(ctx) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.timeout())
		defer cancel()
	}
	// Stopping the command when read gives up cancels this context, not
	// the caller's: the error then says why.
	cmdCtx, stop := context.WithCancel(ctx)
	defer stop()
	cmd := exec.CommandContext(cmdCtx, name, args...)
	cmd.Env = e.environ(os.Environ())
	setGracefulCancel(cmd)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return newError(nil, name, args, err, "")
	}

	start := time.Now()
	if err := cmd.Start(); err != nil {
		logRun(name, args, 0, err, "")
		e.observe(name, args, 0, err)
		return newError(ctx.Err(), name, args, err, "")
	}
	rerr := read(pipe)
	if rerr == nil {
		// Whatever read left (a trailing newline, or more than it wanted)
		// is drained so the command is not blocked writing it.
		_, rerr = io.Copy(io.Discard, pipe)
	} else {
		stop()
	}
	err = cmd.Wait()
	d := time.Since(start)
	logRun(name, args, d, err, stderr.String())
	e.observe(name, args, d, err)
	// A command that exited by itself with a failure says why better
	// than read's complaint about the output it cut; one killed because
	// read gave up does not (a signal's exit code is -1), unless ctx
	// ended too.
	var exitErr *exec.ExitError
	own := errors.As(err, &exitErr) && exitErr.ExitCode() >= 0
	switch {
	case err != nil && (rerr == nil || own || ctx.Err() != nil):
		return newError(ctx.Err(), name, args, err, stderr.String())
	case rerr != nil:
		return rerr
	}
	return nil
}

// setGracefulCancel makes a cancelled or timed-out command get SIGTERM first
// and SIGKILL only after killGrace; WaitDelay also stops Wait from hanging
// on pipes that a grandchild keeps open.
func setGracefulCancel(cmd *exec.Cmd) {
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = killGrace
}

func newError(ctxErr error, name string, args []string, err error, stderr string) *Error {
	e := &Error{Name: name, Args: args, ExitCode: -1, Stderr: stderr, Err: err}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		e.ExitCode = exitErr.ExitCode()
	}
	// A command killed because the context ended reports "signal: terminated";
	// callers need to see the context's reason instead.
	if ctxErr != nil {
		e.Err = ctxErr
	}
	return e
}

func logRun(name string, args []string, d time.Duration, err error, stderr string) {
	line := CommandLine(name, args)
	if err != nil {
		klog.V(2).InfoS("Command failed", "cmd", line, "duration", d, "err", err, "stderr", strings.TrimSpace(stderr))
		return
	}
	klog.V(4).InfoS("Command ran", "cmd", line, "duration", d)
}

// CommandLine renders name and args for messages, quoting arguments that
// would otherwise be ambiguous. It is for humans, not for a shell.
func CommandLine(name string, args []string) string {
	parts := make([]string, 0, len(args)+1)
	parts = append(parts, name)
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\") {
			a = quote(a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`).Replace(s) + `"`
}
