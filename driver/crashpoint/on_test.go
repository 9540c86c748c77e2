//go:build crashpoints

package crashpoint

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc"
)

func TestParse(t *testing.T) {
	for s, want := range map[string]point{
		"CreateVolume:3": {"CreateVolume", 3},
		"CreateVolume:0": {}, "CreateVolume": {}, ":2": {}, "": {}, "X:-1": {}, "X:a": {},
	} {
		if got := parse(s); got != want {
			t.Errorf("parse(%q) = %+v, want %+v", s, got, want)
		}
	}
}

// TestKillsAfterTheNthCommandOfTheMethod runs itself as a child that is
// armed at CreateVolume:2, runs one command outside any call, then two in
// a CreateVolume call: it must die by SIGKILL at the second of those.
func TestKillsAfterTheNthCommandOfTheMethod(t *testing.T) {
	if os.Getenv("CRASHPOINT_CHILD") == "1" {
		observe := Wrap(nil)
		observe("outside", nil, 0, nil)
		info := &grpc.UnaryServerInfo{FullMethod: "/csi.v1.Controller/CreateVolume"}
		_, _ = track(context.Background(), nil, info, func(context.Context, any) (any, error) {
			observe("first", nil, 0, nil)
			observe("second", nil, 0, nil)
			os.Exit(0) // not reached when the seam works
			return nil, nil
		})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestKillsAfterTheNthCommandOfTheMethod$")
	cmd.Env = append(os.Environ(), "CRASHPOINT_CHILD=1", "CARVE_CRASH=CreateVolume:2")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child: %v\n%s", err, out)
	}
	ws, _ := exit.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended %v, want killed by SIGKILL\n%s", exit, out)
	}
	if !strings.Contains(string(out), "SIGKILL after command 2 of CreateVolume: second") {
		t.Errorf("child output lacks the crash point line:\n%s", out)
	}
}
