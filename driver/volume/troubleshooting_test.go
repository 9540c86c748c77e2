package volume

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// troubleshooting is the user's page of errors and health problems.
const troubleshooting = "../../docs/troubleshooting.md"

// readDoc reads the page with its lines joined, so that a quoted text may
// wrap.
func readDoc(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(troubleshooting)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(data)), " ")
}

// TestTroubleshootingNamesEveryError: every error of the code table (the
// text a user reads after "desc =") has its entry on the page, as a bold
// quoted heading.
func TestTroubleshootingNamesEveryError(t *testing.T) {
	doc := readDoc(t)
	for _, r := range codeTable {
		if errors.Is(r.kind, context.Canceled) || errors.Is(r.kind, context.DeadlineExceeded) {
			continue // a code of its own: the page's "Other codes"
		}
		if !strings.Contains(doc, "**`"+r.kind.Error()+"`**") {
			t.Errorf("%s: the error %q has no entry (**`...`**)", troubleshooting, r.kind.Error())
		}
	}
}

// problemReason finds the reasons of volume and node health problems in
// the driver's code.
var problemReason = regexp.MustCompile(`Problem\{Kind: [\w.]+, Reason: "(\w+)"`)

// TestTroubleshootingNamesEveryHealthProblem: every reason a health
// problem can carry has its row in the page's table.
func TestTroubleshootingNamesEveryHealthProblem(t *testing.T) {
	doc := readDoc(t)
	reasons := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		for _, m := range problemReason.FindAllSubmatch(src, -1) {
			reasons[string(m[1])] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(reasons) < 5 {
		t.Fatalf("found only %d health reasons in the driver (%v): has the Problem literal changed shape?", len(reasons), reasons)
	}
	for r := range reasons {
		if !strings.Contains(doc, "| `"+r+"` |") {
			t.Errorf("%s: the health problem %s has no row", troubleshooting, r)
		}
	}
}
