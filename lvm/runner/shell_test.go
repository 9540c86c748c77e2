package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// These tests run real lvm2 on a loop device, with a private lvm.conf that
// sees only that device and never touches device-mapper (global/activation
// = 0): lvm2's metadata commands work so on a machine without
// device-mapper. They need root, lvm and losetup, and lvm2's lvmdbusd
// profile (copied into the private configuration's profile directory).

// testReportConfig is Carve's report --config (lvm/report.go): spaces and
// double quotes in one argument.
const testReportConfig = `report/time_format="%s" report/binary_values_as_numeric=0 ` +
	`report/mark_hidden_devices=1 report/list_item_separator=","`

func reportArgs(cmd, fields string, rest ...string) []string {
	return append([]string{cmd, "--reportformat", "json", "--units", "b", "--nosuffix",
		"--config", testReportConfig, "-o", fields}, rest...)
}

// lvmFixture is one VG on a loop device, shared by the tests of one run.
type lvmFixture struct {
	dir, dev, vg string
	env          []string
}

var (
	fixtureOnce sync.Once
	fixture     *lvmFixture
	fixtureSkip string
)

// lvmTest returns the fixture, or skips t when this machine cannot have it.
func lvmTest(t testing.TB) *lvmFixture {
	t.Helper()
	fixtureOnce.Do(func() { fixture, fixtureSkip = setUpLVM() })
	if fixture == nil {
		t.Skip(fixtureSkip)
	}
	return fixture
}

func setUpLVM() (*lvmFixture, string) {
	if os.Geteuid() != 0 {
		return nil, "lvm2 tests need root"
	}
	for _, bin := range []string{"lvm", "losetup"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, bin + " not installed"
		}
	}
	profile, err := os.ReadFile("/etc/lvm/profile/" + DefaultShellProfile + ".profile")
	if err != nil {
		return nil, "lvm2's lvmdbusd profile is not installed: " + err.Error()
	}
	dir, err := os.MkdirTemp("", "carve-lvmshell-")
	if err != nil {
		return nil, err.Error()
	}
	f := &lvmFixture{dir: dir, vg: fmt.Sprintf("carveshell%d", os.Getpid())}
	img := filepath.Join(dir, "pv.img")
	err = os.WriteFile(img, nil, 0o600)
	if err == nil {
		err = os.Truncate(img, 256<<20)
	}
	if err != nil {
		return nil, err.Error()
	}
	out, err := exec.Command("losetup", "-f", "--show", img).Output()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, "losetup: " + err.Error()
	}
	f.dev = strings.TrimSpace(string(out))
	for _, sub := range []string{"lock", "profile"} {
		_ = os.MkdirAll(filepath.Join(dir, sub), 0o700)
	}
	if err := f.writeConf(true); err != nil {
		f.tearDown()
		return nil, err.Error()
	}
	_ = os.WriteFile(filepath.Join(dir, "profile", DefaultShellProfile+".profile"), profile, 0o600)
	f.env = []string{"LVM_SYSTEM_DIR=" + dir, "DM_DISABLE_UDEV=1", "LVM_SUPPRESS_FD_WARNINGS=1"}
	e := New(time.Minute, f.env...)
	for _, args := range [][]string{{"pvcreate", f.dev}, {"vgcreate", f.vg, f.dev}} {
		if _, err := e.Run(context.Background(), "lvm", args...); err != nil {
			f.tearDown()
			return nil, err.Error()
		}
	}
	return f, ""
}

// writeConf writes the private lvm.conf; useAIO is global/use_aio.
func (f *lvmFixture) writeConf(useAIO bool) error {
	aio := 0
	if useAIO {
		aio = 1
	}
	conf := fmt.Sprintf(`global {
	locking_dir = "%[1]s/lock"
	use_lvmlockd = 0
	activation = 0
	use_aio = %[3]d
}
activation { udev_sync = 0 udev_rules = 0 monitoring = 0 }
devices {
	obtain_device_list_from_udev = 0
	use_devicesfile = 0
	global_filter = [ "a|^%[2]s$|", "r|.*|" ]
}
backup { backup = 0 archive = 0 }
`, f.dir, f.dev, aio)
	return os.WriteFile(filepath.Join(f.dir, "lvm.conf"), []byte(conf), 0o600)
}

func (f *lvmFixture) tearDown() {
	e := New(time.Minute, f.env...)
	_, _ = e.Run(context.Background(), "lvm", "vgremove", "-f", f.vg)
	_, _ = e.Run(context.Background(), "lvm", "pvremove", "-f", f.dev)
	_ = exec.Command("losetup", "-d", f.dev).Run()
	_ = os.RemoveAll(f.dir)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fixture != nil {
		fixture.tearDown()
	}
	os.Exit(code)
}

// execs returns a runner of processes and one of shells (size shells),
// the shells closed at the end of t.
func (f *lvmFixture) execs(t testing.TB, size int) (proc, shell *Exec) {
	proc = New(time.Minute, f.env...)
	shell = New(time.Minute, f.env...)
	shell.Shell = NewShell(size)
	t.Cleanup(func() { _ = shell.Shell.Close() })
	return proc, shell
}

// lv creates an LV for t and returns its name.
func (f *lvmFixture) lv(t testing.TB, e *Exec, name string) string {
	t.Helper()
	if _, err := e.Run(context.Background(), "lvm", "lvcreate", "-Zn", "-L", "4m", "-n", name, f.vg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = New(time.Minute, f.env...).Run(context.Background(), "lvm", "lvremove", "-f", f.vg+"/"+name)
	})
	return name
}

// served counts the commands the shells of s ran.
func served(s *Shell) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served
}

// A report through the shell is byte for byte the process's.
func TestShellReportsMatchProcess(t *testing.T) {
	f := lvmTest(t)
	proc, shell := f.execs(t, 1)
	f.lv(t, proc, "report")
	if _, err := proc.Run(context.Background(), "lvm", "lvchange", "--addtag", "carve.dev/a=1", "--addtag", "b", f.vg+"/report"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		reportArgs("lvs", "lv_name,vg_name,lv_uuid,lv_size,lv_attr,lv_tags,lv_time,lv_active,lv_layout", f.vg),
		reportArgs("lvs", "lv_name,lv_tags", "-a", f.vg+"/report"),
		reportArgs("vgs", "vg_name,vg_uuid,vg_size,vg_free,vg_extent_size,pv_count,lv_count,vg_attr,vg_tags", f.vg),
		reportArgs("pvs", "pv_name,vg_name,pv_uuid,pv_size,pv_free,pv_attr"),
		reportArgs("lvs", "lv_name", "-S", "lv_name=nothing", f.vg),
	} {
		want, err := proc.Run(context.Background(), "lvm", args...)
		if err != nil {
			t.Fatal(err)
		}
		before := served(shell.Shell)
		got, err := shell.Run(context.Background(), "lvm", args...)
		if err != nil {
			t.Fatalf("%s: %v", args[0], err)
		}
		if served(shell.Shell) != before+1 {
			t.Fatalf("%s did not run in the shell", args[0])
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: shell stdout\n%s\nprocess stdout\n%s", args[0], got, want)
		}
	}
	// Carve's report settings reached lvm2 through the shell's quoting.
	out, _ := shell.Run(context.Background(), "lvm", reportArgs("lvs", "lv_tags,lv_time", f.vg+"/report")...)
	if !bytes.Contains(out, []byte(`"lv_tags":"b,carve.dev/a=1"`)) || bytes.Contains(out, []byte(`"lv_time":"20`)) {
		t.Errorf("report settings not applied: %s", out)
	}
}

// errorOf is the *Error of a failed command.
func errorOf(t *testing.T, err error) *Error {
	t.Helper()
	var rerr *Error
	if !errors.As(err, &rerr) {
		t.Fatalf("err = %T %v, want *Error", err, err)
	}
	return rerr
}

// stderrLines are stderr's lines without lvm2's warning that activation
// is off, which a process prints at every start and the shell only once,
// and without the usage hint a process adds to some command line errors
// (not in a shell: _short_usage is skipped when interactive).
func stderrLines(s string) []string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" && !strings.Contains(l, "Activation disabled") && !strings.HasPrefix(l, "  Run `") {
			lines = append(lines, l)
		}
	}
	return lines
}

// A failed command's exit status, and its messages, are the process's.
func TestShellFailuresMatchProcess(t *testing.T) {
	f := lvmTest(t)
	proc, shell := f.execs(t, 1)
	for _, tc := range []struct {
		args []string
		code int
	}{
		{reportArgs("lvs", "lv_name", "carvenosuchvg"), 5},
		{reportArgs("vgs", "vg_name", f.vg, "carvenosuchvg"), 5},
		{[]string{"lvchange", "--addtag", "x", f.vg + "/nosuchlv"}, 5},
		{[]string{"lvcreate", "-Zn", "-L", "100g", "-n", "toobig", f.vg}, 5},
		{[]string{"lvcreate", "--carve-no-such-option", f.vg}, 3},
		{[]string{"lvcreate", "-L", "4m", "-n", "bad/name", f.vg}, 3},
		{[]string{"lvremove", "-f", "--config", "devices/filter=[", f.vg + "/x"}, 0}, // a broken --config
	} {
		_, perr := proc.Run(context.Background(), "lvm", tc.args...)
		_, serr := shell.Run(context.Background(), "lvm", tc.args...)
		if tc.code == 0 {
			// Whatever the process does, the shell does the same.
			if (perr == nil) != (serr == nil) {
				t.Errorf("%q: process %v, shell %v", tc.args, perr, serr)
			}
			if perr == nil {
				continue
			}
			tc.code = errorOf(t, perr).ExitCode
		}
		p, s := errorOf(t, perr), errorOf(t, serr)
		if p.ExitCode != tc.code || s.ExitCode != tc.code {
			t.Errorf("%q: exit status process %d, shell %d; want %d", tc.args, p.ExitCode, s.ExitCode, tc.code)
		}
		if pl, sl := stderrLines(p.Stderr), stderrLines(s.Stderr); !slices.Equal(pl, sl) {
			t.Errorf("%q: stderr\nprocess %q\nshell   %q", tc.args, pl, sl)
		}
		if got, want := s.Error(), p.Error(); stderrLinesMsg(got) != stderrLinesMsg(want) {
			t.Errorf("%q: Error()\nshell   %s\nprocess %s", tc.args, got, want)
		}
	}
}

// stderrLinesMsg drops the activation warning from an Error() text.
func stderrLinesMsg(s string) string {
	s = strings.ReplaceAll(s, "WARNING: Activation disabled. No device-mapper interaction will be attempted.; ", "")
	s, _, _ = strings.Cut(s, "; Run `")
	return s
}

// A prompt gets "n", as from a process's empty stdin.
func TestShellPromptAnswersNo(t *testing.T) {
	f := lvmTest(t)
	proc, shell := f.execs(t, 1)
	f.lv(t, proc, "prompt")
	_, perr := proc.Run(context.Background(), "lvm", "vgremove", f.vg)
	_, serr := shell.Run(context.Background(), "lvm", "vgremove", f.vg)
	p, s := errorOf(t, perr), errorOf(t, serr)
	if p.ExitCode != s.ExitCode || !slices.Equal(stderrLines(p.Stderr), stderrLines(s.Stderr)) {
		t.Errorf("process %d %q, shell %d %q", p.ExitCode, p.Stderr, s.ExitCode, s.Stderr)
	}
	// The shell goes on.
	if _, err := shell.Run(context.Background(), "lvm", reportArgs("vgs", "vg_name", f.vg)...); err != nil {
		t.Fatal(err)
	}
	if served(shell.Shell) != 2 {
		t.Errorf("served %d commands, want 2", served(shell.Shell))
	}
}

// Commands run concurrently on a pool of two shells, overflowing to
// processes, each with its own result.
func TestShellConcurrent(t *testing.T) {
	f := lvmTest(t)
	proc, shell := f.execs(t, 2)
	const n = 6
	for i := range n {
		f.lv(t, proc, fmt.Sprintf("conc%d", i))
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			lv := fmt.Sprintf("%s/conc%d", f.vg, i)
			for j := range 4 {
				tag := fmt.Sprintf("t%d-%d", i, j)
				if _, err := shell.Run(context.Background(), "lvm", "lvchange", "--addtag", tag, lv); err != nil {
					errs <- err
					return
				}
				out, err := shell.Run(context.Background(), "lvm", reportArgs("lvs", "lv_name,lv_tags", lv)...)
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Contains(out, []byte(fmt.Sprintf(`{"lv_name":"conc%d", "lv_tags":`, i))) || !bytes.Contains(out, []byte(tag)) {
					errs <- fmt.Errorf("lvs %s: %s", lv, out)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := served(shell.Shell); got == 0 {
		t.Error("no command ran in a shell")
	}
	shell.Shell.mu.Lock()
	running := shell.Shell.running
	shell.Shell.mu.Unlock()
	if running > 2 {
		t.Errorf("%d shells running, want at most 2", running)
	}
}

// holdVGLock takes lvm2's lock of the VG, so that a command changing it
// waits; release gives it back.
func (f *lvmFixture) holdVGLock(t *testing.T) (release func()) {
	t.Helper()
	l, err := os.OpenFile(filepath.Join(f.dir, "lock", "V_"+f.vg), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(l.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = l.Close() }) }
	t.Cleanup(release)
	return release
}

// awaitLockWaiter waits (up to a minute) until some process waits for the
// VG lock holdVGLock holds: /proc/locks lists a blocked flock of the lock
// file's inode with "->".
func (f *lvmFixture) awaitLockWaiter(t *testing.T) {
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(f.dir, "lock", "V_"+f.vg), &st); err != nil {
		t.Error(err)
		return
	}
	inode := ":" + strconv.FormatUint(st.Ino, 10) + " "
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		locks, err := os.ReadFile("/proc/locks")
		if err != nil {
			t.Error(err)
			return
		}
		for _, l := range strings.Split(string(locks), "\n") {
			if strings.Contains(l, "->") && strings.Contains(l, inode) {
				return
			}
		}
	}
	t.Error("no process waited for the VG lock within a minute")
}

// gone waits a moment for process pid to end.
func gone(pid int) bool {
	for range 50 {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// idlePIDs are the processes of the idle shells.
func idlePIDs(s *Shell) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var pids []int
	for _, sh := range s.idle {
		pids = append(pids, sh.cmd.Process.Pid)
	}
	return pids
}

// A command that reaches its deadline while lvm2 waits for a lock: lvm2
// catches the SIGTERM and fails the command by itself, in the shell as in a
// process; the shell is retired and the next command gets a new one.
func TestShellDeadlineInterruptsWait(t *testing.T) {
	f := lvmTest(t)
	proc, shell := f.execs(t, 1)
	lv := f.lv(t, proc, "deadline")
	if _, err := shell.Run(context.Background(), "lvm", reportArgs("lvs", "lv_name", f.vg)...); err != nil {
		t.Fatal(err)
	}
	first := idlePIDs(shell.Shell)
	if len(first) != 1 {
		t.Fatalf("idle shells %v", first)
	}
	release := f.holdVGLock(t)
	// The deadline must fall while lvm waits for the lock, after it has
	// installed its handlers: a fresh lvm process on a loaded machine took
	// more than 500 ms to get there, and the SIGTERM killed it (exit -1).
	const deadline = 3 * time.Second
	shell.Timeout = deadline
	proc.Timeout = deadline
	args := []string{"lvchange", "--addtag", "late", f.vg + "/" + lv}
	_, perr := proc.Run(context.Background(), "lvm", args...)
	start := time.Now()
	_, serr := shell.Run(context.Background(), "lvm", args...)
	if d := time.Since(start); d > deadline+killGrace {
		t.Errorf("the interrupted command took %v", d)
	}
	p, s := errorOf(t, perr), errorOf(t, serr)
	if p.ExitCode != 5 || s.ExitCode != p.ExitCode || !errors.Is(perr, context.DeadlineExceeded) || !errors.Is(serr, context.DeadlineExceeded) {
		t.Errorf("process %d %v\nshell %d %v\nwant both exit 5, deadline exceeded", p.ExitCode, perr, s.ExitCode, serr)
	}
	if pl, sl := stderrLines(p.Stderr), stderrLines(s.Stderr); !slices.Equal(pl, sl) {
		t.Errorf("stderr\nprocess %q\nshell   %q", pl, sl)
	}
	if !gone(first[0]) {
		t.Errorf("the interrupted shell %d is still there", first[0])
	}
	release()
	shell.Timeout = time.Minute
	if _, err := shell.Run(context.Background(), "lvm", args...); err != nil {
		t.Fatal(err)
	}
	if next := idlePIDs(shell.Shell); len(next) != 1 || next[0] == first[0] {
		t.Errorf("idle shells %v after the cut of %d", next, first[0])
	}
}

// A shell that does not answer by the deadline, nor end at SIGTERM, is
// killed after killGrace: the command fails as a cut process does (exit
// -1, the context's error), and the next one gets a new shell.
func TestShellDeadlineKillsShell(t *testing.T) {
	f := lvmTest(t)
	_, shell := f.execs(t, 1)
	vgs := reportArgs("vgs", "vg_name", f.vg)
	if _, err := shell.Run(context.Background(), "lvm", vgs...); err != nil {
		t.Fatal(err)
	}
	first := idlePIDs(shell.Shell)
	if err := syscall.Kill(first[0], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	shell.Timeout = 300 * time.Millisecond
	start := time.Now()
	_, err := shell.Run(context.Background(), "lvm", vgs...)
	if d := time.Since(start); d < killGrace || d > killGrace+5*time.Second {
		t.Errorf("the cut took %v, want the kill grace %v", d, killGrace)
	}
	if s := errorOf(t, err); s.ExitCode != -1 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v (exit %d), want a cut: exit -1, deadline exceeded", err, s.ExitCode)
	}
	if err := syscall.Kill(first[0], 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the cut shell %d is still there: %v", first[0], err)
	}
	shell.Timeout = time.Minute
	if _, err := shell.Run(context.Background(), "lvm", vgs...); err != nil {
		t.Fatal(err)
	}
	if next := idlePIDs(shell.Shell); len(next) != 1 || next[0] == first[0] {
		t.Errorf("idle shells %v after the cut of %d", next, first[0])
	}
}

// A cancelled context interrupts a command as the deadline does.
func TestShellCancel(t *testing.T) {
	f := lvmTest(t)
	proc, shell := f.execs(t, 1)
	lv := f.lv(t, proc, "cancel")
	// The shell started first and the cancel once lvm2 waits for the
	// lock: a fixed delay cut the shell's start instead on a loaded
	// machine (make test), and the command then ran as a process.
	if _, err := shell.Run(context.Background(), "lvm", reportArgs("vgs", "vg_name", f.vg)...); err != nil {
		t.Fatal(err)
	}
	release := f.holdVGLock(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		f.awaitLockWaiter(t)
		cancel()
	}()
	_, err := shell.Run(ctx, "lvm", "lvchange", "--addtag", "x", f.vg+"/"+lv)
	if s := errorOf(t, err); s.ExitCode != 5 || !errors.Is(err, context.Canceled) || !strings.Contains(s.Stderr, "Interrupted...") {
		t.Errorf("err = %v, want lvm2's interrupted wait: exit 5, context.Canceled", err)
	}
	release()
	if _, err := shell.Run(context.Background(), "lvm", reportArgs("vgs", "vg_name", f.vg)...); err != nil {
		t.Fatal(err)
	}
}

// A shell that dies, idle or in the middle of a command, is replaced; the
// command it was running fails as a killed process does.
func TestShellDeathReplaced(t *testing.T) {
	f := lvmTest(t)
	proc, shell := f.execs(t, 1)
	lv := f.lv(t, proc, "death")
	vgs := reportArgs("vgs", "vg_name", f.vg)
	if _, err := shell.Run(context.Background(), "lvm", vgs...); err != nil {
		t.Fatal(err)
	}
	pids := idlePIDs(shell.Shell)
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Once it is gone, whether the pool has seen the death or the
	// command's line finds no reader, the command runs (in a new shell or
	// a process) and succeeds. (Killed at the very moment the line goes
	// in, it fails as a killed process would: nothing tells whether lvm2
	// read it.)
	if !gone(pids[0]) {
		t.Fatalf("shell %d outlived SIGKILL", pids[0])
	}
	if _, err := shell.Run(context.Background(), "lvm", vgs...); err != nil {
		t.Fatalf("after the idle shell died: %v", err)
	}
	if _, err := shell.Run(context.Background(), "lvm", vgs...); err != nil {
		t.Fatalf("after the idle shell died: %v", err)
	}
	if pids2 := idlePIDs(shell.Shell); len(pids2) != 1 || pids2[0] == pids[0] {
		t.Errorf("idle shells %v after %d died", pids2, pids[0])
	}

	// Killed mid-command (waiting for the VG lock).
	f.holdVGLock(t)
	pids = idlePIDs(shell.Shell)
	time.AfterFunc(300*time.Millisecond, func() { _ = syscall.Kill(pids[0], syscall.SIGKILL) })
	_, err := shell.Run(context.Background(), "lvm", "lvchange", "--addtag", "x", f.vg+"/"+lv)
	if s := errorOf(t, err); s.ExitCode != -1 || !errors.Is(err, errShellExited) || !strings.Contains(err.Error(), "signal: killed") {
		t.Errorf("err = %v, want exit -1 from a killed shell", err)
	}
}

// Without the profile no shell starts, and commands run as processes.
func TestShellWithoutProfileRunsProcesses(t *testing.T) {
	f := lvmTest(t)
	_, shell := f.execs(t, 1)
	shell.Shell.Profile = "carve-no-such-profile"
	for range 2 {
		out, err := shell.Run(context.Background(), "lvm", reportArgs("vgs", "vg_name", f.vg)...)
		if err != nil || !bytes.Contains(out, []byte(f.vg)) {
			t.Fatalf("vgs: %s, %v", out, err)
		}
	}
	if served(shell.Shell) != 0 {
		t.Error("a shell ran commands without its profile")
	}
	shell.Shell.mu.Lock()
	retry := shell.Shell.retryAt
	shell.Shell.mu.Unlock()
	if !retry.After(time.Now()) {
		t.Error("no back-off after a failed start")
	}
}

// Observe and the log see shell commands as they see processes.
func TestShellObserveAndLogs(t *testing.T) {
	f := lvmTest(t)
	_, shell := f.execs(t, 1)
	type seen struct {
		sub string
		ok  bool
	}
	var got []seen
	shell.Observe = func(name string, args []string, d time.Duration, err error) {
		if name != "lvm" || d <= 0 {
			t.Errorf("observed %s after %v", name, d)
		}
		got = append(got, seen{args[0], err == nil})
	}
	logs := captureLogs(t)
	_, _ = shell.Run(context.Background(), "lvm", reportArgs("vgs", "vg_name", f.vg)...)
	_, _ = shell.Run(context.Background(), "lvm", reportArgs("vgs", "vg_name", "carvenosuchvg")...)
	if want := []seen{{"vgs", true}, {"vgs", false}}; !slices.Equal(got, want) {
		t.Errorf("observed %v, want %v", got, want)
	}
	if l := logs(); !strings.Contains(l, `"Command ran" cmd="lvm vgs`) ||
		!strings.Contains(l, `"Command failed" cmd="lvm vgs`) || !strings.Contains(l, `err="exit status 5"`) ||
		!strings.Contains(l, `Volume group "carvenosuchvg" not found`) {
		t.Errorf("log:\n%s", l)
	}
}

// Close stops the shells; later commands run as processes.
func TestShellClose(t *testing.T) {
	f := lvmTest(t)
	_, shell := f.execs(t, 2)
	vgs := reportArgs("vgs", "vg_name", f.vg)
	if _, err := shell.Run(context.Background(), "lvm", vgs...); err != nil {
		t.Fatal(err)
	}
	pids := idlePIDs(shell.Shell)
	if err := shell.Shell.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("shell %d still there after Close: %v", pid, err)
		}
	}
	if _, err := shell.Run(context.Background(), "lvm", vgs...); err != nil {
		t.Fatal(err)
	}
	if served(shell.Shell) != 1 {
		t.Errorf("served %d after Close, want 1", served(shell.Shell))
	}
}

// Close waits for a busy shell to finish its command and exit: a shell
// left behind would hold carve's cgroup after carve is gone.
func TestShellCloseWaitsForBusy(t *testing.T) {
	f := lvmTest(t)
	proc, shell := f.execs(t, 1)
	lv := f.lv(t, proc, "closebusy")
	release := f.holdVGLock(t)
	tagged := tagInShell(shell, f.vg+"/"+lv, "busy")
	pid := liveShellPID(t, shell.Shell)
	closed := make(chan struct{})
	go func() {
		_ = shell.Shell.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while the shell's command waited for the VG lock")
	case <-time.After(300 * time.Millisecond):
	}
	release()
	if err := <-tagged; err != nil {
		t.Fatalf("the busy command: %v", err)
	}
	select {
	case <-closed:
	case <-time.After(killGrace + 10*time.Second):
		t.Fatal("Close did not return after the command ended")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("shell %d still there after Close: %v", pid, err)
	}
}

// liveShellPID waits for s's one shell to have started (busy from its
// start: waitBusy counts a shell still starting) and returns its process.
func liveShellPID(t *testing.T, s *Shell) int {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		s.mu.Lock()
		for sh := range s.live {
			s.mu.Unlock()
			return sh.cmd.Process.Pid
		}
		s.mu.Unlock()
	}
	t.Fatal("no shell started within a minute")
	return 0
}

// A shell is retired after MaxCommands.
func TestShellMaxCommands(t *testing.T) {
	f := lvmTest(t)
	_, shell := f.execs(t, 1)
	shell.Shell.MaxCommands = 2
	vgs := reportArgs("vgs", "vg_name", f.vg)
	var pids [][]int
	for range 3 {
		if _, err := shell.Run(context.Background(), "lvm", vgs...); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, idlePIDs(shell.Shell))
	}
	if len(pids[0]) != 1 || len(pids[1]) != 0 || len(pids[2]) != 1 || pids[2][0] == pids[0][0] {
		t.Errorf("idle shells after each command: %v", pids)
	}
}

// The benchmarks compare a process per command with a shell, each with
// lvm2's default asynchronous I/O and with global/use_aio=0. lvm2 sets up
// an AIO context for every command and destroys it at the end; the kernel's
// io_destroy waits for an RCU grace period (measured on the host: 30-40 ms
// of a shell's 35 ms lvs, with 2 ms of CPU).
func benchmark(b *testing.B, run func(b *testing.B, shells int)) {
	f := lvmTest(b)
	for _, io := range []string{"aio", "syncio"} {
		if err := f.writeConf(io == "aio"); err != nil {
			b.Fatal(err)
		}
		for _, kind := range []string{"process", "shell"} {
			b.Run(io+"/"+kind, func(b *testing.B) {
				run(b, map[string]int{"process": 0, "shell": 1}[kind])
			})
		}
	}
	if err := f.writeConf(true); err != nil {
		b.Fatal(err)
	}
}

func benchmarkCommands(b *testing.B, shells int, args ...[]string) {
	f := lvmTest(b)
	proc, shell := f.execs(b, 1)
	e := proc
	if shells > 0 {
		e = shell
		if _, err := e.Run(context.Background(), "lvm", args[0]...); err != nil { // start the shell
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		for _, a := range args {
			if _, err := e.Run(context.Background(), "lvm", a...); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	if shells > 0 && served(shell.Shell) < b.N {
		b.Fatalf("served %d of %d", served(shell.Shell), b.N)
	}
}

// An lvs of Carve's kind: JSON, Carve's --config, a long field list.
func BenchmarkLVS(b *testing.B) {
	args := reportArgs("lvs", "lv_name,vg_name,lv_uuid,lv_path,lv_size,lv_attr,lv_tags,lv_layout,lv_role,lv_active,lv_time", lvmTest(b).vg)
	benchmark(b, func(b *testing.B, shells int) { benchmarkCommands(b, shells, args) })
}

// A tag added then removed: two changing commands per iteration.
func BenchmarkTag(b *testing.B) {
	f := lvmTest(b)
	proc, _ := f.execs(b, 0)
	lv := f.vg + "/" + f.lv(b, proc, "benchtag")
	args := [][]string{{"lvchange", "--addtag", "carve.dev/bench", lv}, {"lvchange", "--deltag", "carve.dev/bench", lv}}
	benchmark(b, func(b *testing.B, shells int) { benchmarkCommands(b, shells, args...) })
}

// A failed command: the shell pays a lastlog for its messages.
func BenchmarkFailure(b *testing.B) {
	f := lvmTest(b)
	args := reportArgs("vgs", "vg_name", "carvenosuchvg")
	benchmark(b, func(b *testing.B, shells int) {
		proc, shell := f.execs(b, 1)
		e := proc
		if shells > 0 {
			e = shell
		}
		for b.Loop() {
			if _, err := e.Run(context.Background(), "lvm", args...); err == nil {
				b.Fatal("vgs of a missing VG succeeded")
			}
		}
	})
}

// Arguments that need the shell's quoting reach lvm2 as they are: the
// outcome is the process's.
func TestShellQuotingMatchesProcess(t *testing.T) {
	f := lvmTest(t)
	proc, shell := f.execs(t, 1)
	f.lv(t, proc, "quoting")
	if _, err := proc.Run(context.Background(), "lvm", "lvchange", "--addtag", "a#b", "--addtag", "c=d", f.vg+"/quoting"); err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{
		{"-S", "lv_name = quoting"},                                         // spaces: single quotes
		{"-S", `lv_name=~"^quot"`},                                          // double quotes: single quotes
		{"--config", `report/list_item_separator="; "`},                     // double quotes and a space
		{"--config", `report/list_item_separator='|'`},                      // single quotes: double quotes
		{"--config", "report/list_item_separator=\"'\""},                    // both: a process
		{"-S", "nosuchfield=1"},                                             // fails, with a long help on stdout
		{"-S", "#"},                                                         // a leading #: quoted
		{"--config", `report/list_item_separator="#"`, "-S", "lv_tags=c=d"}, // not a comment inside a word
	} {
		args := append([]string{"lvs", "--reportformat", "json", "-o", "lv_name,lv_tags"}, extra...)
		args = append(args, f.vg+"/quoting")
		want, perr := proc.Run(context.Background(), "lvm", args...)
		before := served(shell.Shell)
		got, serr := shell.Run(context.Background(), "lvm", args...)
		_, carried := shellLine(args)
		if carried != (served(shell.Shell) == before+1) {
			t.Errorf("%q: carried %v, served %d -> %d", extra, carried, before, served(shell.Shell))
		}
		if (perr == nil) != (serr == nil) || !bytes.Equal(got, want) {
			t.Errorf("%q:\nprocess %v\n%s\nshell %v\n%s", extra, perr, want, serr, got)
		}
		if perr != nil && errorOf(t, perr).ExitCode != errorOf(t, serr).ExitCode {
			t.Errorf("%q: exit process %v, shell %v", extra, perr, serr)
		}
		if perr == nil && !bytes.Contains(got, []byte(`"lv_name":"quoting"`)) {
			t.Errorf("%q: no row: %s", extra, got)
		}
	}
}

// A command of an AsProcess context runs as a process with shells idle:
// the shell serves the commands before and after it, not it.
func TestShellAsProcess(t *testing.T) {
	f := lvmTest(t)
	_, shell := f.execs(t, 1)
	vgs := reportArgs("vgs", "vg_name", f.vg)
	for i, ctx := range []context.Context{context.Background(), AsProcess(context.Background()), context.Background()} {
		if _, err := shell.Run(ctx, "lvm", vgs...); err != nil {
			t.Fatal(err)
		}
		if want := min(i+1, 1+i/2); served(shell.Shell) != want {
			t.Errorf("after command %d: served %d, want %d (the second runs as a process)", i+1, served(shell.Shell), want)
		}
	}
}

// A command that finds the only shell busy waits for it no longer than
// the wait's bound (no process timed yet: defaultProcessCost), then runs
// as a process: a shell held by a command waiting for a lock makes no one
// else wait for that lock.
func TestShellBusyRunsProcess(t *testing.T) {
	f := lvmTest(t)
	proc, shell := f.execs(t, 1)
	lv := f.lv(t, proc, "busy")
	release := f.holdVGLock(t)
	done := tagInShell(shell, f.vg+"/"+lv, "busy")
	waitBusy(shell.Shell)
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	_, err := shell.Run(context.Background(), "lvm", reportArgs("vgs", "vg_name", "carvenosuchvg")...)
	if s := errorOf(t, err); s.ExitCode != 5 {
		t.Errorf("vgs of a missing VG: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second || d < defaultProcessCost {
		t.Errorf("the second command took %v, want its wait for the shell (%v) and a process", d, defaultProcessCost)
	}
	if served(shell.Shell) != 0 {
		t.Errorf("served %d while the shell was busy, want 0", served(shell.Shell))
	}
	if b := shell.Shell.waitBound(); b == defaultProcessCost {
		t.Errorf("the process's time was not noted: wait bound still %v", b)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if served(shell.Shell) != 1 {
		t.Errorf("served %d, want 1", served(shell.Shell))
	}
}

// tagInShell adds tag to lv through e in the background; its error comes
// on the channel.
func tagInShell(e *Exec, lv, tag string) chan error {
	done := make(chan error, 1)
	go func() {
		_, err := e.Run(context.Background(), "lvm", "lvchange", "--addtag", tag, lv)
		done <- err
	}()
	return done
}

// waitBusy waits a moment for the only shell of s to be busy.
func waitBusy(s *Shell) {
	for range 100 {
		s.mu.Lock()
		busy := s.running == 1 && len(s.idle) == 0
		s.mu.Unlock()
		if busy {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A command that finds the only shell busy, with processes dear here (a
// process noted at 5 s), waits for the shell and runs in it once the
// command before it is done: a burst is served by the shells.
func TestShellBusyWaitsForTheShell(t *testing.T) {
	f := lvmTest(t)
	proc, shell := f.execs(t, 1)
	lv := f.lv(t, proc, "wait")
	shell.Shell.noteProcess(5 * time.Second)
	release := f.holdVGLock(t)
	first := tagInShell(shell, f.vg+"/"+lv, "first")
	waitBusy(shell.Shell)
	second := tagInShell(shell, f.vg+"/"+lv, "second")
	time.Sleep(300 * time.Millisecond)
	release()
	for _, c := range []chan error{first, second} {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	if served(shell.Shell) != 2 {
		t.Errorf("served %d, want both commands in the shell", served(shell.Shell))
	}
	out, err := proc.Run(context.Background(), "lvm", reportArgs("lvs", "lv_tags", f.vg+"/"+lv)...)
	if err != nil || !strings.Contains(string(out), "first") || !strings.Contains(string(out), "second") {
		t.Errorf("tags after both: %s, %v", out, err)
	}
}

// An answer written for what only looked like a prompt runs as a command
// of its own, "n"; its reply is skipped, not taken for the next command's.
func TestShellStrayAnswerSkipped(t *testing.T) {
	f := lvmTest(t)
	_, shell := f.execs(t, 1)
	vgs := reportArgs("vgs", "vg_name", f.vg)
	if _, err := shell.Run(context.Background(), "lvm", vgs...); err != nil {
		t.Fatal(err)
	}
	shell.Shell.mu.Lock()
	sh := shell.Shell.idle[0]
	shell.Shell.mu.Unlock()
	if err := sh.send(promptAnswer); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{vgs, reportArgs("vgs", "vg_name", "carvenosuchvg")} {
		out, err := shell.Run(context.Background(), "lvm", args...)
		if args[len(args)-1] == f.vg && (err != nil || !bytes.Contains(out, []byte(f.vg))) {
			t.Errorf("vgs: %s, %v", out, err)
		}
		if args[len(args)-1] != f.vg && !strings.Contains(fmt.Sprint(err), `Volume group "carvenosuchvg" not found`) {
			t.Errorf("vgs of a missing VG: %v", err)
		}
	}
	if pids := idlePIDs(shell.Shell); len(pids) != 1 || pids[0] != sh.cmd.Process.Pid {
		t.Errorf("the shell was replaced: %v", pids)
	}
}

// Commands that change the VG work through the shell; a process sees what
// they did.
func TestShellChangesVG(t *testing.T) {
	f := lvmTest(t)
	proc, shell := f.execs(t, 1)
	lv := f.vg + "/changes"
	t.Cleanup(func() { _, _ = proc.Run(context.Background(), "lvm", "lvremove", "-f", lv) })
	for _, args := range [][]string{
		{"lvcreate", "-Zn", "-L", "4m", "-n", "changes", "--addtag", "carve.dev/x=1", f.vg},
		{"lvextend", "-L", "8m", lv},
		{"lvchange", "--deltag", "carve.dev/x=1", "--addtag", "carve.dev/x=2", lv},
		{"lvrename", f.vg, "changes", "changes2"},
		{"lvrename", f.vg, "changes2", "changes"},
	} {
		if _, err := shell.Run(context.Background(), "lvm", args...); err != nil {
			t.Fatal(err)
		}
	}
	out, err := proc.Run(context.Background(), "lvm", reportArgs("lvs", "lv_name,lv_size,lv_tags", lv)...)
	if err != nil || !bytes.Contains(out, []byte(`{"lv_name":"changes", "lv_size":"8388608", "lv_tags":"carve.dev/x=2"}`)) {
		t.Fatalf("lvs: %s, %v", out, err)
	}
	if _, err := shell.Run(context.Background(), "lvm", "lvremove", "-f", lv); err != nil {
		t.Fatal(err)
	}
	if _, err := proc.Run(context.Background(), "lvm", reportArgs("lvs", "lv_name", lv)...); err == nil {
		t.Error("the LV is still there after lvremove in the shell")
	}
	if served(shell.Shell) != 6 {
		t.Errorf("served %d, want 6", served(shell.Shell))
	}
}

// A command on DataWork's context is bounded by that context only, in the
// shell as in a process.
func TestShellDataClass(t *testing.T) {
	f := lvmTest(t)
	_, shell := f.execs(t, 1)
	shell.Timeout = time.Nanosecond
	vgs := reportArgs("vgs", "vg_name", f.vg)
	ctx, cancel := DataWork(context.Background(), time.Minute)
	defer cancel()
	if _, err := shell.Run(ctx, "lvm", vgs...); err != nil {
		t.Fatalf("data class: %v", err)
	}
	if _, err := shell.Run(context.Background(), "lvm", vgs...); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("metadata class with a 1ns timeout: %v", err)
	}
	if served(shell.Shell) != 1 {
		t.Errorf("served %d, want 1", served(shell.Shell))
	}
}

// A shell that failed for a missing command profile is told apart: the
// hint names the profile and the package that installs it.
func TestShellStartHint(t *testing.T) {
	missing := errors.New("lvm shell exited: exit status 5: /etc/lvm/profile/lvmdbusd.profile: stat failed: No such file or directory; Failed to apply command profile lvmdbusd.")
	if h := shellStartHint(missing, "lvmdbusd"); !strings.Contains(h, "lvmdbusd.profile") || !strings.Contains(h, "lvm2 package") {
		t.Errorf("hint for a missing profile: %q", h)
	}
	if h := shellStartHint(errors.New("lvm shell: framing lost"), "lvmdbusd"); strings.Contains(h, "reinstall") {
		t.Errorf("hint for another failure blames the profile: %q", h)
	}
}
