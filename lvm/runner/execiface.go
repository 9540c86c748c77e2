package runner

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	utilexec "k8s.io/utils/exec"
)

// AsExecInterface returns a k8s.io/utils/exec.Interface whose commands run
// with the runner's environment and timeout and are logged like Run's, so
// that the node's filesystem commands go through this runner too: those
// driver/nodefs writes itself (mkfs, fsck, blkid) and those of the
// k8s.io/mount-utils functions it calls with this exec (GetDiskFormat's
// blkid, ResizeFs's resize2fs, xfs_growfs, blockdev). The class of a
// command is its context, never its name: one made by CommandContext with
// a context from DataWork is a data command (no Exec.Timeout); any other
// one gets the metadata timeout.
//
// Errors keep k8s.io/utils/exec's shapes (utilexec.ExitError for a non-zero
// exit, utilexec.ErrExecutableNotFound) because mount-utils type-asserts
// them to read exit codes (blkid's 2 = "no filesystem"), and nodefs reads
// fsck's the same way. A command that outlived its timeout returns *Error
// wrapping context.DeadlineExceeded instead.
func (e *Exec) AsExecInterface() utilexec.Interface { return execIface{e} }

type execIface struct{ e *Exec }

func (x execIface) Command(name string, args ...string) utilexec.Cmd {
	return x.CommandContext(context.Background(), name, args...)
}

func (x execIface) CommandContext(ctx context.Context, name string, args ...string) utilexec.Cmd {
	// The timeout starts at Start, not here: callers may build a command
	// well before they run it.
	cctx, cancel := context.WithCancel(ctx)
	c := exec.CommandContext(cctx, name, args...)
	c.Env = x.e.environ(os.Environ())
	setGracefulCancel(c)
	return &execCmd{c: c, parent: ctx, cancel: cancel, e: x.e, name: name, args: args, data: isData(ctx)}
}

func (x execIface) LookPath(file string) (string, error) {
	p, err := exec.LookPath(file)
	if err != nil && !errors.Is(err, exec.ErrDot) {
		return "", utilexec.ErrExecutableNotFound
	}
	return p, nil
}

// execCmd implements utilexec.Cmd on top of os/exec.
type execCmd struct {
	c      *exec.Cmd
	parent context.Context
	cancel context.CancelFunc
	e      *Exec
	name   string
	args   []string
	data   bool // a data command: only parent's deadline bounds it

	stderr   bytes.Buffer // copy of stderr for logs when the caller also reads it
	start    time.Time
	timedOut bool
	mu       sync.Mutex
	timer    *time.Timer
}

func (c *execCmd) SetDir(dir string)       { c.c.Dir = dir }
func (c *execCmd) SetStdin(in io.Reader)   { c.c.Stdin = in }
func (c *execCmd) SetStdout(out io.Writer) { c.c.Stdout = out }
func (c *execCmd) SetStderr(out io.Writer) { c.c.Stderr = out }

// SetEnv replaces the base environment; the runner's own entries still come
// last so they win (e.g. DM_DISABLE_UDEV=1 in a VM without udev).
func (c *execCmd) SetEnv(env []string) { c.c.Env = c.e.environ(env) }

func (c *execCmd) StdoutPipe() (io.ReadCloser, error) {
	r, err := c.c.StdoutPipe()
	return r, convertErr(err)
}

func (c *execCmd) StderrPipe() (io.ReadCloser, error) {
	r, err := c.c.StderrPipe()
	return r, convertErr(err)
}

func (c *execCmd) Start() error {
	// Tee stderr so failures can be logged with it, whoever else reads it.
	switch {
	case c.c.Stderr == nil:
		c.c.Stderr = &c.stderr
	case sameWriter(c.c.Stderr, c.c.Stdout):
		// CombinedOutput: os/exec shares one pipe only while Stdout and
		// Stderr are the same value; two goroutines writing into one
		// bytes.Buffer would race. The log then gets the combined output.
		w := io.MultiWriter(c.c.Stderr, &c.stderr)
		c.c.Stdout, c.c.Stderr = w, w
	default:
		c.c.Stderr = io.MultiWriter(c.c.Stderr, &c.stderr)
	}
	c.start = time.Now()
	if err := c.c.Start(); err != nil {
		c.cancel()
		logRun(c.name, c.args, 0, err, "")
		c.e.observe(c.name, c.args, 0, err)
		return convertErr(err)
	}
	if !c.data {
		c.mu.Lock()
		c.timer = time.AfterFunc(c.e.timeout(), c.expire)
		c.mu.Unlock()
	}
	return nil
}

func (c *execCmd) expire() {
	c.mu.Lock()
	c.timedOut = true
	c.mu.Unlock()
	c.cancel()
}

func (c *execCmd) Wait() error {
	err := c.c.Wait()
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Stop()
	}
	timedOut := c.timedOut
	c.mu.Unlock()
	c.cancel()
	d := time.Since(c.start)
	logRun(c.name, c.args, d, err, c.stderr.String())
	c.e.observe(c.name, c.args, d, err)
	switch {
	case err != nil && timedOut:
		return newError(context.DeadlineExceeded, c.name, c.args, err, c.stderr.String())
	case err != nil && c.parent.Err() != nil:
		return newError(c.parent.Err(), c.name, c.args, err, c.stderr.String())
	}
	return convertErr(err)
}

func (c *execCmd) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return c.Wait()
}

func (c *execCmd) Output() ([]byte, error) {
	var out bytes.Buffer
	c.c.Stdout = &out
	err := c.Run()
	return out.Bytes(), err
}

func (c *execCmd) CombinedOutput() ([]byte, error) {
	var out bytes.Buffer
	c.c.Stdout, c.c.Stderr = &out, &out
	err := c.Run()
	return out.Bytes(), err
}

// sameWriter compares like os/exec does: interface comparison panics on
// non-comparable dynamic types, which then simply are not the same.
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// Stop asks the command to end with SIGTERM and kills it if it is still
// running after killGrace (cancel's SIGTERM, then WaitDelay's SIGKILL).
func (c *execCmd) Stop() {
	if c.c.Process == nil {
		return
	}
	_ = c.c.Process.Signal(syscall.SIGTERM)
	time.AfterFunc(killGrace, c.cancel)
}

// convertErr gives errors the types that k8s.io/utils/exec's own
// implementation returns, which its users type-assert.
func convertErr(err error) error {
	if err == nil {
		return nil
	}
	var exitErr *exec.ExitError
	var pathErr *fs.PathError
	switch {
	case errors.As(err, &exitErr):
		return &utilexec.ExitErrorWrapper{ExitError: exitErr}
	case errors.Is(err, exec.ErrNotFound), errors.As(err, &pathErr):
		return utilexec.ErrExecutableNotFound
	}
	return err
}
