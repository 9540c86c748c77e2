package e2e

// The cluster soak's writers and what the test reads of them: not behind
// the e2e build tag, so that the parser's unit test and fuzz target run
// with the unit tests (make test-unit, make fuzz).
//
// A writer (soakWriterScript) is a workload container writing small files to its volume, each
// fsynced, then its SHA-256 appended to the writer's acknowledgement log,
// also fsynced. Each container start is a writer of its own (a random ID),
// so a log has one author and is never appended to after its writer ends.
// A line in a log thus says its file was on disk before the line was
// written; a line the test has read once (after a sync) must be there, the
// same, for ever after, on the volume and in restores of snapshots taken
// after the read.

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"carve.dev/carve/test/soakmodel"
)

// writesSeen is what one read of a volume showed: the complete lines of
// each writer's log (the SHA-256 of its files 1..n) and each file's
// SHA-256 as read back.
type writesSeen struct {
	logs  map[string][]string // writer ID -> sums acknowledged, in order
	files map[string]string   // file name -> SHA-256 read
}

var (
	writerID = regexp.MustCompile(`^[0-9a-f]{8}$`)
	ackLine  = regexp.MustCompile(`^([1-9][0-9]{0,8}) ([0-9a-f]{64}) ok$`)
	sumLine  = regexp.MustCompile(`^([0-9a-f]{64})  ([0-9a-f]{8}-[1-9][0-9]{0,8}\.d)$`)
)

// parseWrites reads soakReadScript's output: every acknowledgement log
// ("ack ID", then its lines, then a newline of the script's) and then every
// file's SHA-256 ("sums", then sha256sum's lines). A log line that is not a
// complete acknowledgement may only be a log's last (a writer killed in
// the middle of its echo); lines must count 1, 2, 3...; anything else is
// an error, as is output of another shape.
func parseWrites(out string) (writesSeen, error) {
	w := writesSeen{logs: map[string][]string{}, files: map[string]string{}}
	lines := strings.Split(out, "\n")
	i := 0
	for i < len(lines) && lines[i] != "sums" {
		id, ok := strings.CutPrefix(lines[i], "ack ")
		if !ok || !writerID.MatchString(id) {
			if lines[i] == "" && i == len(lines)-1 {
				return w, nil // nothing written yet: no directory
			}
			return w, fmt.Errorf("line %d: %q, want \"ack ID\" or \"sums\"", i+1, lines[i])
		}
		if _, dup := w.logs[id]; dup {
			return w, fmt.Errorf("line %d: log %s twice", i+1, id)
		}
		i++
		sums, next, err := parseLog(lines, i)
		if err != nil {
			return w, fmt.Errorf("log %s: %w", id, err)
		}
		w.logs[id], i = sums, next
	}
	if i == len(lines) {
		return w, fmt.Errorf("no \"sums\" line")
	}
	for n, l := range lines[i+1:] {
		if l == "" && i+1+n == len(lines)-1 {
			break
		}
		m := sumLine.FindStringSubmatch(l)
		if m == nil {
			return w, fmt.Errorf("line %d: %q is not a file's SHA-256", i+2+n, l)
		}
		w.files[m[2]] = m[1]
	}
	return w, nil
}

// parseLog reads one log's lines from lines[i] up to the next header or
// "sums". soakReadScript ends each log with a newline of its own, so a log
// whose last line is whole is followed by one empty line.
func parseLog(lines []string, i int) (sums []string, next int, err error) {
	torn := false
	for ; i < len(lines); i++ {
		l := lines[i]
		if l == "sums" || strings.HasPrefix(l, "ack ") {
			return sums, i, nil
		}
		if l == "" {
			if i+1 < len(lines) && lines[i+1] != "sums" && !strings.HasPrefix(lines[i+1], "ack ") {
				return nil, i, fmt.Errorf("line %d: an empty line inside the log", i+1)
			}
			continue
		}
		if torn {
			return nil, i, fmt.Errorf("line %d: %q after a line cut short", i+1, l)
		}
		m := ackLine.FindStringSubmatch(l)
		if m == nil {
			torn = true // the last one, or the next line fails
			continue
		}
		if n, _ := strconv.Atoi(m[1]); n != len(sums)+1 {
			return nil, i, fmt.Errorf("line %d: write %d after %d", i+1, n, len(sums))
		}
		sums = append(sums, m[2])
	}
	return sums, i, nil
}

// writeFile is the file of writer id's write n.
func writeFile(id string, n int) string { return fmt.Sprintf("%s-%d.d", id, n) }

// verifyWrites checks a read against the writes acknowledged before it
// (soakmodel's Writes, by file). Each complete log line acknowledges its
// file's write: the test learns the ones it had not seen; then every
// acknowledged write must still be in its log, the same, and its file
// must read back with its SHA-256. It returns what the test knows now, the
// writes it learnt, the number of files checked, and the problems found
// (none: the volume is as it must be).
func verifyWrites(known soakmodel.Writes, seen writesSeen) (now soakmodel.Writes, learnt, checked int, problems []string) {
	now = known.Clone()
	logged, files := map[string]soakmodel.Sum{}, map[string]soakmodel.Sum{}
	for _, id := range slices.Sorted(maps.Keys(seen.logs)) {
		for n, sum := range seen.logs[id] {
			name := writeFile(id, n+1)
			logged[name] = soakmodel.Sum{SHA256: sum}
			if now.Learn(name, logged[name]) {
				learnt++
			}
		}
	}
	for name, sum := range seen.files {
		files[name] = soakmodel.Sum{SHA256: sum}
	}
	_, problems = now.Check("the log's line of", logged, false)
	checked, lost := now.Check("file", files, false)
	return now, learnt, checked, append(problems, lost...)
}
