package runner

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"
)

func TestExecInterfaceCombinedOutputAndEnv(t *testing.T) {
	x := New(0, "CARVE_TEST_EXTRA=1").AsExecInterface()
	out, err := x.Command("sh", "-c", `echo "out $CARVE_TEST_EXTRA"; echo err >&2`).CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "out 1\nerr\n" {
		t.Errorf("CombinedOutput = %q", out)
	}
}

// mount-utils reads blkid's and fsck's exit codes through utilexec.ExitError.
func TestExecInterfaceExitStatus(t *testing.T) {
	x := New(0).AsExecInterface()
	out, err := x.Command("sh", "-c", "echo nope >&2; exit 2").CombinedOutput()
	ee, ok := err.(utilexec.ExitError)
	if !ok {
		t.Fatalf("err = %T %v, want utilexec.ExitError", err, err)
	}
	if ee.ExitStatus() != 2 || string(out) != "nope\n" {
		t.Errorf("exit status %d, output %q", ee.ExitStatus(), out)
	}
}

func TestExecInterfaceOutputKeepsStdoutOnly(t *testing.T) {
	out, err := New(0).AsExecInterface().Command("sh", "-c", "echo out; echo err >&2").Output()
	if err != nil || string(out) != "out\n" {
		t.Fatalf("Output = %q, %v", out, err)
	}
}

func TestExecInterfaceSetEnvKeepsRunnerEnv(t *testing.T) {
	cmd := New(0, "CARVE_TEST_EXTRA=runner").AsExecInterface().Command("sh", "-c", `echo "$A $CARVE_TEST_EXTRA"`)
	cmd.SetEnv([]string{"A=caller", "CARVE_TEST_EXTRA=caller"})
	var buf bytes.Buffer
	cmd.SetStdout(&buf)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if buf.String() != "caller runner\n" {
		t.Errorf("env = %q, want the caller's plus the runner's entries winning", buf.String())
	}
}

func TestExecInterfaceTimeout(t *testing.T) {
	start := time.Now()
	_, err := New(100*time.Millisecond).AsExecInterface().Command("sleep", "10").CombinedOutput()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestExecInterfaceContextCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := New(0).AsExecInterface().CommandContext(ctx, "sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := cmd.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestExecInterfaceNotFound(t *testing.T) {
	x := New(0).AsExecInterface()
	if _, err := x.Command("carve-no-such-binary").CombinedOutput(); err != utilexec.ErrExecutableNotFound {
		t.Errorf("Command err = %v, want ErrExecutableNotFound", err)
	}
	if _, err := x.LookPath("carve-no-such-binary"); err != utilexec.ErrExecutableNotFound {
		t.Errorf("LookPath err = %v", err)
	}
	if p, err := x.LookPath("sh"); err != nil || !strings.HasSuffix(p, "/sh") {
		t.Errorf("LookPath(sh) = %q, %v", p, err)
	}
}

func TestExecInterfacePipesAndStop(t *testing.T) {
	cmd := New(0).AsExecInterface().Command("sh", "-c", "echo ready; exec sleep 10")
	r, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := r.Read(buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("read %q, %v", buf, err)
	}
	cmd.Stop()
	if err := cmd.Wait(); err == nil {
		t.Error("Wait after Stop succeeded, want the SIGTERM exit")
	}
}

// mount-utils' SafeFormatAndMount reads blkid's exit code 2 ("nothing
// found") through utilexec.ExitError: check it end to end on a file.
func TestExecInterfaceWithMountUtils(t *testing.T) {
	for _, bin := range []string{"blkid", "mkfs.ext4"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed", bin)
		}
	}
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, make([]byte, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	fm := mount.NewSafeFormatAndMount(mount.NewFakeMounter(nil), New(time.Minute).AsExecInterface())
	if format, err := fm.GetDiskFormat(img); err != nil || format != "" {
		t.Fatalf("blank image: format %q, %v", format, err)
	}
	if out, err := fm.Exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	if format, err := fm.GetDiskFormat(img); err != nil || format != "ext4" {
		t.Fatalf("after mkfs: format %q, %v", format, err)
	}
}

func TestExecInterfaceCommandsAreObserved(t *testing.T) {
	var seen []string
	e := New(0)
	e.Observe = func(name string, _ []string, _ time.Duration, err error) {
		seen = append(seen, name+":"+strconv.FormatBool(err == nil))
	}
	_ = e.AsExecInterface().Command("true").Run()
	_, _ = e.AsExecInterface().Command("false").CombinedOutput()
	_ = e.AsExecInterface().Command("carve-no-such-binary").Run()
	if want := []string{"true:true", "false:false", "carve-no-such-binary:false"}; !slices.Equal(seen, want) {
		t.Errorf("observed %v, want %v", seen, want)
	}
}
