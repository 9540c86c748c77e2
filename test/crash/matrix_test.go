//go:build vmtest

package crash

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// result is one operation's row of the matrix.
type result struct {
	name           string
	steps, covered int
	skipped        string
}

// TestCrashAtEveryStep runs the matrix and prints it. CARVE_CRASH_OPS (a
// regexp of operation names) narrows it; CARVE_CRASH_EVERY=k crashes at
// every kth step only (CI's bounded run), the full run crashes at all.
func TestCrashAtEveryStep(t *testing.T) {
	e := setup(t)
	only := regexp.MustCompile(os.Getenv("CARVE_CRASH_OPS"))
	every, _ := strconv.Atoi(os.Getenv("CARVE_CRASH_EVERY"))
	every = max(every, 1)
	var rows []result
	for _, o := range ops() {
		if !only.MatchString(o.name) {
			continue
		}
		if o.twoPVs && len(e.disks) < 2 {
			rows = append(rows, result{name: o.name, skipped: "needs CARVE_TEST_DISK2"})
			continue
		}
		var r result
		t.Run(o.name, func(t *testing.T) {
			e.t = t
			r = e.matrix(o, every)
		})
		e.t = t
		rows = append(rows, r)
	}
	printMatrix(t, rows, every)
}

// matrix runs o without a crash for the reference end state, then with a
// crash after command 1, 2, ... until o finishes before the crash point.
func (e *env) matrix(o op, every int) result {
	t := e.t
	r := result{name: o.name}
	e.reset()
	e.start("")
	call, check := o.prepare(e)
	must(t, call())
	if check != nil {
		check()
	}
	want := e.state()
	for n := 1; ; n += every {
		e.reset()
		e.start("")
		call, check := o.prepare(e)
		e.stop()
		e.start(fmt.Sprintf("%s:%d", o.method, n))
		err := call()
		if !e.proc.Exited(3 * time.Second) {
			// o ended before its nth command: every point before is done.
			if err != nil {
				t.Fatalf("%s without a crash: %v", o.name, err)
			}
			r.steps = n - 1
			return r
		}
		after := func() {}
		if o.atCrash != nil {
			after = o.atCrash(e)
		}
		e.start("")
		if err := call(); err != nil {
			t.Errorf("crash after command %d: the retry failed: %v", n, err)
			continue
		}
		after()
		if check != nil {
			check()
		}
		if got := e.state(); got != want {
			t.Errorf("crash after command %d: the end state differs from an uninterrupted call's:\n%s", n, diffLines(want, got))
			continue
		}
		r.covered++
		t.Logf("crash after command %d: the retry ends as an uninterrupted call does", n)
	}
}

func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	in := func(l string, ls []string) bool {
		for _, x := range ls {
			if x == l {
				return true
			}
		}
		return false
	}
	var out []string
	for _, l := range w {
		if !in(l, g) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range g {
		if !in(l, w) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

func printMatrix(t *testing.T, rows []result, every int) {
	var b strings.Builder
	fmt.Fprintf(&b, "crash matrix (a crash after every %d. command):\n", every)
	fmt.Fprintf(&b, "%-34s %6s %8s\n", "operation", "steps", "covered")
	steps, covered := 0, 0
	for _, r := range rows {
		if r.skipped != "" {
			fmt.Fprintf(&b, "%-34s %s\n", r.name, "skipped: "+r.skipped)
			continue
		}
		fmt.Fprintf(&b, "%-34s %6d %8d\n", r.name, r.steps, r.covered)
		steps += r.steps
		covered += r.covered
	}
	fmt.Fprintf(&b, "%-34s %6d %8d\n", "total", steps, covered)
	t.Log(b.String())
}
