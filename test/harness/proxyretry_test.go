// Package harness tests the shell helpers that the test harness and CI
// share (scripts/goenv.sh), run by bash as the scripts run them.
package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeGo fails its first failures runs with message on stderr (and a
// partial line on stdout), then prints "done" and succeeds. It counts its
// runs in a file.
const fakeGo = `#!/bin/sh
n=$(cat "$COUNT" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" >"$COUNT"
if [ "$n" -le "$FAILURES" ]; then
	echo "partial"
	echo "go: example.com/m@v1.0.0: $MESSAGE" >&2
	exit 1
fi
echo "done"
`

// runProxyRetry runs proxy_retry from scripts/goenv.sh on fakeGo and
// returns its stdout, stderr, exit code and how many times it ran fakeGo.
func runProxyRetry(t *testing.T, failures, message string) (string, string, int, string) {
	t.Helper()
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake-go")
	if err := os.WriteFile(fake, []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	goenv, err := filepath.Abs("../../scripts/goenv.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", `source "$1" && proxy_retry "$2"`, "bash", goenv, fake)
	cmd.Env = append(os.Environ(), "CARVE_PROXY_WAIT=0", "COUNT="+filepath.Join(dir, "count"),
		"FAILURES="+failures, "MESSAGE="+message)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	rc := 0
	if err := cmd.Run(); err != nil {
		exit, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatal(err)
		}
		rc = exit.ExitCode()
	}
	runs, err := os.ReadFile(filepath.Join(dir, "count"))
	if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), rc, strings.TrimSpace(string(runs))
}

func TestProxyRetry(t *testing.T) {
	const tls = `Get "https://proxy.example/m/@v/v1.0.0.info": net/http: TLS handshake timeout`
	t.Run("network error, then success", func(t *testing.T) {
		stdout, stderr, rc, runs := runProxyRetry(t, "1", tls)
		if rc != 0 || runs != "2" {
			t.Fatalf("exit %d after %s runs, want 0 after 2; stderr:\n%s", rc, runs, stderr)
		}
		// The failed try's partial stdout must not reach a reader.
		if stdout != "done\n" {
			t.Errorf("stdout %q, want only the last try's %q", stdout, "done\n")
		}
		if !strings.Contains(stderr, "try 1 of 3 failed on the network") {
			t.Errorf("stderr does not say why it tried again:\n%s", stderr)
		}
	})
	t.Run("network error every time", func(t *testing.T) {
		stdout, stderr, rc, runs := runProxyRetry(t, "9", "dial tcp 192.0.2.1:443: i/o timeout")
		if rc != 1 || runs != "3" {
			t.Fatalf("exit %d after %s runs, want 1 after 3; stderr:\n%s", rc, runs, stderr)
		}
		if stdout != "partial\n" || !strings.Contains(stderr, "i/o timeout") {
			t.Errorf("the last try's output is not what was replayed: stdout %q, stderr:\n%s", stdout, stderr)
		}
	})
	t.Run("other error, no retry", func(t *testing.T) {
		_, stderr, rc, runs := runProxyRetry(t, "9", "reading go.mod: unknown revision v1.0.0")
		if rc != 1 || runs != "1" {
			t.Fatalf("exit %d after %s runs, want 1 after 1; stderr:\n%s", rc, runs, stderr)
		}
		if strings.Contains(stderr, "proxy_retry:") {
			t.Errorf("a failure that is not the network's was retried:\n%s", stderr)
		}
	})
}
