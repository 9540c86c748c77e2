package runner

import (
	"fmt"
	"strings"
)

// maxStderrInMessage keeps Error() readable; Stderr keeps everything.
const maxStderrInMessage = 1024

// Error is a failed command: it did not start, exited non-zero or ran out of
// time. Err is the underlying cause (an *exec.ExitError, an exec lookup
// error, or context.DeadlineExceeded / context.Canceled).
type Error struct {
	Name     string
	Args     []string
	ExitCode int // -1 when the command did not exit by itself
	Stderr   string
	Err      error
}

// Error renders e.g. `lvm lvcreate -n x vg0: exit status 5: Volume group "vg0" has insufficient free space`.
func (e *Error) Error() string {
	msg := fmt.Sprintf("%s: %v", CommandLine(e.Name, e.Args), e.Err)
	if s := TrimStderr(e.Stderr); s != "" {
		msg += ": " + s
	}
	return msg
}

// Unwrap returns the cause, so errors.Is(err, context.DeadlineExceeded)
// works for timeouts.
func (e *Error) Unwrap() error { return e.Err }

// TrimStderr joins stderr's non-empty lines with "; " (lvm2 indents each
// line with two spaces) and shortens the result to fit in one log line.
func TrimStderr(stderr string) string {
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	s := strings.Join(lines, "; ")
	if len(s) > maxStderrInMessage {
		s = s[:maxStderrInMessage] + "..."
	}
	return s
}
