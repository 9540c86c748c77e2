package e2e

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"carve.dev/carve/test/soakmodel"
)

func sum(c byte) string { return strings.Repeat(string(c), 64) }

// sampleRead is soakReadScript's output for two writers: aaaaaaaa wrote two
// files, the second not yet acknowledged... rather, its log was cut in the
// middle of line 3 (no newline: the script's echo ends it); bbbbbbbb's
// log ends with a newline (so an empty line follows). One file (the one
// of the cut line) has no acknowledgement.
var sampleRead = "ack aaaaaaaa\n" +
	"1 " + sum('1') + " ok\n" +
	"2 " + sum('2') + " ok\n" +
	"3 " + sum('3')[:10] + "\n" +
	"ack bbbbbbbb\n" +
	"1 " + sum('4') + " ok\n" +
	"\n" +
	"sums\n" +
	sum('1') + "  aaaaaaaa-1.d\n" +
	sum('2') + "  aaaaaaaa-2.d\n" +
	sum('3') + "  aaaaaaaa-3.d\n" +
	sum('4') + "  bbbbbbbb-1.d\n"

func TestParseWritesReadsLogsAndSums(t *testing.T) {
	w, err := parseWrites(sampleRead)
	if err != nil {
		t.Fatal(err)
	}
	wantLogs := map[string][]string{"aaaaaaaa": {sum('1'), sum('2')}, "bbbbbbbb": {sum('4')}}
	if !reflect.DeepEqual(w.logs, wantLogs) {
		t.Errorf("logs %v, want %v", w.logs, wantLogs)
	}
	if len(w.files) != 4 || w.files["aaaaaaaa-3.d"] != sum('3') {
		t.Errorf("files %v", w.files)
	}
	for _, empty := range []string{"", "sums\n"} {
		if w, err := parseWrites(empty); err != nil || len(w.logs) != 0 || len(w.files) != 0 {
			t.Errorf("parseWrites(%q) = %+v, %v; want nothing", empty, w, err)
		}
	}
}

func TestParseWritesRefusesWhatNoWriterWrites(t *testing.T) {
	good := "1 " + sum('1') + " ok\n"
	for name, out := range map[string]string{
		"no sums":              "ack aaaaaaaa\n" + good,
		"garbage first":        "hello\nsums\n",
		"bad writer ID":        "ack ../etc\n" + good + "sums\n",
		"a log twice":          "ack aaaaaaaa\n" + good + "ack aaaaaaaa\nsums\n",
		"a gap in the numbers": "ack aaaaaaaa\n" + good + "3 " + sum('3') + " ok\nsums\n",
		"cut short, then more": "ack aaaaaaaa\n1 abc\n" + good + "sums\n",
		"an empty line inside": "ack aaaaaaaa\n" + good + "\n" + good + "sums\n",
		"a bad sum line":       "sums\n" + sum('1') + "  ../x.d\n",
		"uppercase sum":        "sums\n" + strings.ToUpper(sum('a')) + "  aaaaaaaa-1.d\n",
	} {
		if _, err := parseWrites(out); err == nil {
			t.Errorf("%s: parseWrites(%q) took it", name, out)
		}
	}
}

func TestVerifyWritesFindsLostAndChangedWrites(t *testing.T) {
	seen, err := parseWrites(sampleRead)
	if err != nil {
		t.Fatal(err)
	}
	known := soakmodel.Writes{"aaaaaaaa-1.d": {SHA256: sum('1')}}
	now, learnt, checked, problems := verifyWrites(known, seen)
	if len(problems) != 0 || learnt != 2 || checked != 3 || now.Count() != 3 {
		t.Errorf("a read holding every acknowledged write: now %v, %d learnt, %d checked, problems %v", now, learnt, checked, problems)
	}
	for name, c := range map[string]struct {
		known soakmodel.Writes
		read  string
		want  []string
	}{
		"log gone": {soakmodel.Writes{"cccccccc-1.d": {SHA256: sum('1')}}, sampleRead,
			[]string{"the log's line of cccccccc-1.d of an acknowledged write is gone", "file cccccccc-1.d of an acknowledged write is gone"}},
		"log shorter": {soakmodel.Writes{"bbbbbbbb-1.d": {SHA256: sum('4')}, "bbbbbbbb-2.d": {SHA256: sum('5')}}, sampleRead,
			[]string{"the log's line of bbbbbbbb-2.d of an acknowledged write is gone", "file bbbbbbbb-2.d of"}},
		"log rewritten": {soakmodel.Writes{"bbbbbbbb-1.d": {SHA256: sum('5')}}, sampleRead,
			[]string{"the log's line of bbbbbbbb-1.d reads back as SHA-256 " + sum('4') + ", it was acknowledged as SHA-256 " + sum('5'), "file bbbbbbbb-1.d reads back"}},
		"file gone": {nil, strings.Replace(sampleRead, sum('4')+"  bbbbbbbb-1.d\n", "", 1),
			[]string{"file bbbbbbbb-1.d of an acknowledged write is gone"}},
		"file changed": {nil, strings.Replace(sampleRead, sum('2')+"  aaaaaaaa-2.d", sum('9')+"  aaaaaaaa-2.d", 1),
			[]string{"file aaaaaaaa-2.d reads back as SHA-256 " + sum('9')}},
	} {
		seen, err := parseWrites(c.read)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		now, _, _, problems := verifyWrites(c.known, seen)
		if !slices.EqualFunc(problems, c.want, strings.HasPrefix) {
			t.Errorf("%s: problems %q, want ones beginning %q", name, problems, c.want)
		}
		if now.Count() < c.known.Count() {
			t.Errorf("%s: the test forgot acknowledged writes: %v after %v", name, now, c.known)
		}
	}
}

// FuzzSoakWrites: parseWrites never panics; what it accepts is consistent
// with itself (verified against what it says was acknowledged, it finds
// the same problems as against nothing), and a read that lost any
// acknowledged line is always caught.
func FuzzSoakWrites(f *testing.F) {
	f.Add(sampleRead)
	f.Add("")
	f.Add("sums\n")
	f.Fuzz(func(t *testing.T, out string) {
		seen, err := parseWrites(out)
		if err != nil {
			return
		}
		known, _, checked, base := verifyWrites(nil, seen)
		again, learnt, checked2, problems := verifyWrites(known, seen)
		if !reflect.DeepEqual(problems, base) || checked2 != checked || learnt != 0 || !reflect.DeepEqual(again, known) {
			t.Fatalf("verified against its own acknowledgements: %v, %d checked; against none: %v, %d", problems, checked2, base, checked)
		}
		for id, sums := range seen.logs {
			if len(sums) == 0 {
				continue
			}
			lost := writesSeen{logs: maps.Clone(seen.logs), files: seen.files}
			lost.logs[id] = sums[:len(sums)-1]
			_, _, _, p := verifyWrites(known, lost)
			want := fmt.Sprintf("the log's line of %s of an acknowledged write is gone", writeFile(id, len(sums)))
			if !slices.Contains(p, want) {
				t.Fatalf("writer %s's last acknowledged write lost: problems %q, none says %q", id, p, want)
			}
		}
	})
}
