//go:build bench

package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// counters are carve's command counters at one moment: runs by command
// (lvm's subcommand for lvm) and seconds spent in them.
type counters struct {
	runs    map[string]float64
	seconds map[string]float64
	// copied and copySecs: carve_copied_bytes_total and
	// carve_copy_seconds_total, the copy loops' own bytes and time.
	copied, copySecs float64
}

// scrape reads carve_commands_total and carve_command_duration_seconds
// from carve's /metrics. Reading them runs no command in carve: its
// gauges are set by the calls that compute them, not at scrape time.
func (e *env) scrape() counters {
	e.t.Helper()
	c, err := scrapeURL(e.metrics)
	e.must(err)
	return c
}

func scrapeURL(url string) (counters, error) {
	c := counters{runs: map[string]float64{}, seconds: map[string]float64{}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return c, fmt.Errorf("scrape %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return c, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if cmd, v, ok := sample(line, "carve_commands_total{"); ok {
			c.runs[cmd] += v
		} else if cmd, v, ok := sample(line, "carve_command_duration_seconds_sum{"); ok {
			c.seconds[cmd] += v
		} else if v, ok := unlabelled(line, "carve_copied_bytes_total"); ok {
			c.copied = v
		} else if v, ok := unlabelled(line, "carve_copy_seconds_total"); ok {
			c.copySecs = v
		}
	}
	if err := sc.Err(); err != nil {
		return c, fmt.Errorf("scrape %s: %w", url, err)
	}
	return c, nil
}

// sample parses one exposition line of the metric prefix into its command
// label and value.
func sample(line, prefix string) (cmd string, v float64, ok bool) {
	rest, found := strings.CutPrefix(line, prefix)
	if !found {
		return "", 0, false
	}
	_, after, found := strings.Cut(rest, `command="`)
	if !found {
		return "", 0, false
	}
	cmd, after, _ = strings.Cut(after, `"`)
	_, num, found := strings.Cut(after, "} ")
	if !found {
		return "", 0, false
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	return cmd, v, err == nil
}

// unlabelled parses one exposition line of the label-less metric name.
func unlabelled(line, name string) (float64, bool) {
	num, ok := strings.CutPrefix(line, name+" ")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	return v, err == nil
}

// minus is c - before, command by command.
func (c counters) minus(before counters) counters {
	d := counters{runs: map[string]float64{}, seconds: map[string]float64{},
		copied: c.copied - before.copied, copySecs: c.copySecs - before.copySecs}
	for k, v := range c.runs {
		if x := v - before.runs[k]; x != 0 {
			d.runs[k] = x
		}
	}
	for k, v := range c.seconds {
		if x := v - before.seconds[k]; x != 0 {
			d.seconds[k] = x
		}
	}
	return d
}

// rss is carve's resident memory in bytes (VmRSS of /proc/PID/status).
func (e *env) rss() int64 {
	e.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", e.pid))
	e.must(err)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			e.must(err)
			return kb << 10
		}
	}
	e.t.Fatalf("no VmRSS in /proc/%d/status", e.pid)
	return 0
}
