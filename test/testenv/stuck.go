package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// WatchStuck logs, if the returned stop is not called within after, what
// the kernel is doing: every task in uninterruptible sleep (D state) with
// its kernel stack, and device-mapper's tables and status. A VM suite's
// operation that hangs in the kernel (a device-mapper deadlock) otherwise
// shows only as a suite cut by its guard, with nothing to go on.
func WatchStuck(t *testing.T, what string, after time.Duration) (stop func()) {
	t.Helper()
	timer := time.AfterFunc(after, func() {
		var b strings.Builder
		fmt.Fprintf(&b, "%s: still running after %s; tasks in D state:\n", what, after)
		writeStuckTasks(&b)
		for _, args := range [][]string{{"table"}, {"status"}} {
			out, err := exec.Command("dmsetup", args...).CombinedOutput()
			fmt.Fprintf(&b, "dmsetup %s (%v):\n%s", args[0], err, out)
		}
		// t.Log may not be called once the test has ended; stderr always
		// reaches the suite's log.
		fmt.Fprintln(os.Stderr, b.String())
	})
	return func() { timer.Stop() }
}

// writeStuckTasks writes each D-state task's name, command line and
// kernel stack.
func writeStuckTasks(b *strings.Builder) {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid := p.Name()
		if pid[0] < '0' || pid[0] > '9' {
			continue
		}
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		// The state follows the command name's closing parenthesis.
		i := strings.LastIndexByte(string(stat), ')')
		if err != nil || i < 0 || i+2 >= len(stat) || stat[i+2] != 'D' {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline")
		stack, _ := os.ReadFile("/proc/" + pid + "/stack")
		fmt.Fprintf(b, "== %s [%s]\n%s", string(stat[:i+1]),
			strings.ReplaceAll(string(cmd), "\x00", " "), stack)
	}
}
