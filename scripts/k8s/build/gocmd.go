package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// goRunner runs the go command, niced and retried.
//
// Niced (CARVE_BUILD_NICE, default 10): builds take both cores for
// minutes, and a QEMU VM running tests beside them must keep its core.
// Not 19: at that weight a cold build got nothing while the unit tests
// and the VM ran, and became the path to the e2e (test/README.md).
//
// Retried as scripts/goenv.sh's proxy_retry does (its settings, which
// build.sh exports): a fetch from the module proxy that fails on the
// network is tried again; any other failure is returned at once.
type goRunner struct {
	nice   string
	tries  int
	wait   time.Duration
	netErr *regexp.Regexp // nil: no retries
}

func newGoRunner() (goRunner, error) {
	r := goRunner{nice: envOr("CARVE_BUILD_NICE", "10"), tries: 3, wait: 15 * time.Second}
	var err error
	if s := os.Getenv("CARVE_PROXY_TRIES"); s != "" {
		if r.tries, err = strconv.Atoi(s); err != nil {
			return r, fmt.Errorf("CARVE_PROXY_TRIES: %w", err)
		}
	}
	if s := os.Getenv("CARVE_PROXY_WAIT"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return r, fmt.Errorf("CARVE_PROXY_WAIT: %w", err)
		}
		r.wait = time.Duration(n) * time.Second
	}
	if s := os.Getenv("CARVE_PROXY_NET_ERRORS"); s != "" {
		if r.netErr, err = regexp.Compile(s); err != nil {
			return r, fmt.Errorf("CARVE_PROXY_NET_ERRORS: %w", err)
		}
	}
	return r, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// run runs go ARGS in dir and returns its stdout. Its stderr is held
// until the last try ends (a failed try's output would only confuse),
// then replayed without the "go: downloading" lines, of which a cold
// build prints hundreds.
func (r goRunner) run(ctx context.Context, dir string, args ...string) ([]byte, error) {
	for try := 1; ; try++ {
		var out, errb bytes.Buffer
		cmd := exec.CommandContext(ctx, "nice", append([]string{"-n", r.nice, "go"}, args...)...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &out, &errb
		err := cmd.Run()
		netErr := r.netErr != nil && r.netErr.Match(errb.Bytes())
		if err == nil || try >= r.tries || !netErr || ctx.Err() != nil {
			replay(errb.String())
			if err != nil {
				return nil, fmt.Errorf("go %s (in %s): %w", strings.Join(args, " "), dir, err)
			}
			return out.Bytes(), nil
		}
		logf("try %d of %d failed on the network, again in %v: %s", try, r.tries,
			time.Duration(try)*r.wait, r.netErr.Find(errb.Bytes()))
		select {
		case <-time.After(time.Duration(try) * r.wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func replay(stderr string) {
	for _, line := range strings.SplitAfter(stderr, "\n") {
		if line != "" && !strings.HasPrefix(line, "go: downloading ") {
			fmt.Fprint(os.Stderr, line)
		}
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "carve-k8s: "+format+"\n", args...)
}
