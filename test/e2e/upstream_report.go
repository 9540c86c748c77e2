package e2e

// Reading the Kubernetes project's storage suite's results: not behind the
// e2e build tag, so that its unit test runs with the others (make
// test-unit) on the report shapes Ginkgo writes.

import (
	"encoding/xml"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// upstreamResult counts a run's specs by their end state.
type upstreamResult struct {
	passed  int
	skipped []string // "NAME: why", of the specs that skipped themselves
	failed  []string
	ran     []string // the names of the specs the focus selected
}

// unmatched returns the entries of a selection that selected no spec of
// the run: an entry the suite's wording no longer matches (a renamed spec,
// tags added to its text) silently drops out of the run otherwise, as the
// volume-modify entries once did.
func (r *upstreamResult) unmatched(entries []string) []string {
	var out []string
	for _, e := range entries {
		re, err := regexp.Compile(`External.Storage.*(` + e + `)`)
		if err != nil {
			out = append(out, e+" ("+err.Error()+")")
			continue
		}
		if !slices.ContainsFunc(r.ran, re.MatchString) {
			out = append(out, e)
		}
	}
	return out
}

func (r *upstreamResult) String() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped", r.passed, len(r.failed), len(r.skipped))
}

// readJUnit counts the specs of Ginkgo's JUnit report by status.
func readJUnit(path string) (*upstreamResult, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep struct {
		Suites []struct {
			Cases []struct {
				Name    string `xml:"name,attr"`
				Status  string `xml:"status,attr"`
				Skipped struct {
					Message string `xml:"message,attr"`
				} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r := &upstreamResult{}
	for _, s := range rep.Suites {
		for _, c := range s.Cases {
			// The suite's own setup and report nodes are listed as
			// cases too ("[SynchronizedBeforeSuite]", ...): they count
			// when they fail, never as a spec that passed.
			suiteNode := strings.HasPrefix(c.Name, "[") && strings.Contains(c.Name, "Suite]")
			if suiteNode && (c.Status == "passed" || c.Status == "skipped") {
				continue
			}
			if !suiteNode && (c.Status != "skipped" || c.Skipped.Message != "skipped") {
				r.ran = append(r.ran, c.Name)
			}
			switch c.Status {
			case "passed":
				r.passed++
			case "skipped", "pending":
				// The report lists every spec of e2e.test: those the
				// focus left out say just "skipped"; a spec that skipped
				// itself gives its reason ("skipped - ...").
				if c.Skipped.Message != "skipped" {
					r.skipped = append(r.skipped, c.Name+": "+c.Skipped.Message)
				}
			default: // failed, panicked, interrupted, timedout, aborted
				r.failed = append(r.failed, c.Status+": "+c.Name)
			}
		}
	}
	sort.Strings(r.failed)
	sort.Strings(r.skipped)
	return r, nil
}
