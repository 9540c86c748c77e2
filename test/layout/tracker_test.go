package layout

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// trackerNumber finds a reference to an issue of Carve's own tracker by
// number: the word issue followed by a number (with a space, a hyphen or
// a #, or none), or a number after # in parentheses. An upstream
// issue is named with its repository (kubernetes/kubernetes#123,
// golang/go#75804), which this does not match.
var trackerNumber = regexp.MustCompile(`(?i)\bissues?[ -]?#?[0-9]+\b|\(#[0-9]+\)`)

// textFile tells the files read for tracker numbers: Carve's sources,
// scripts, manifests and documentation.
func textFile(name string) bool {
	switch filepath.Ext(name) {
	case ".go", ".md", ".sh", ".yaml", ".yml", ".tpl", ".txt", ".json", ".mod":
		return true
	}
	return name == "Makefile" || name == "Dockerfile"
}

// TestNoTrackerNumbers: the tracker is not in the repository, so a
// comment or page that gives an issue's number tells a reader nothing; it
// says what the issue meant instead.
func TestNoTrackerNumbers(t *testing.T) {
	files := 0
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "../.." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "_output" || d.Name() == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !textFile(d.Name()) {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for i, line := range strings.Split(string(src), "\n") {
			if m := trackerNumber.FindString(line); m != "" {
				t.Errorf("%s:%d: %q: say what the issue meant (the tracker is not in the repository)", strings.TrimPrefix(path, "../../"), i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 400 {
		t.Fatalf("read only %d files", files)
	}
}
