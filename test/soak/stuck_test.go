//go:build vmtest

package soak

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// watchIO runs fn, a read or write of a volume's files, and fails the soak
// when it is still blocked after the call deadline: a device left
// suspended by an lvm2 command cut short blocks its I/O for good, and
// without this the worker, then the whole run, would hang until the VM's
// timeout with nothing said. The failure names the VG's device-mapper
// state; then the suspended devices are resumed (dmsetup, the test's
// rescue, never Carve's) so that the run can end and report.
func (s *soak) watchIO(what string, fn func() error) error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(s.cfg.Deadline):
	}
	s.fail("%s: %w after %s; device-mapper devices of %s:\n%s", what, errStuck, s.cfg.Deadline, vg, dmState())
	resumeSuspended(s)
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		return fmt.Errorf("%s: still blocked a minute after the suspended devices were resumed", what)
	}
}

// dmState is dmsetup's view of the VG's devices: name, attr, tables,
// suspension, open count.
func dmState() string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "dmsetup", "info", "-c", "--noheadings", "-o", "name,attr,tables_loaded,suspended,open").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("dmsetup info: %v: %s", err, out)
	}
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(line, vg+"-") {
			b.WriteString("    " + line + "\n")
		}
	}
	return b.String()
}

// resumeSuspended resumes every suspended device of the VG.
func resumeSuspended(s *soak) {
	for _, line := range strings.Split(dmState(), "\n") {
		f := strings.Split(strings.TrimSpace(line), ":")
		if len(f) < 4 || f[3] != "Suspended" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := exec.CommandContext(ctx, "dmsetup", "resume", f[0]).CombinedOutput()
		cancel()
		s.t.Logf("rescue: dmsetup resume %s: %v %s", f[0], err, out)
	}
}
