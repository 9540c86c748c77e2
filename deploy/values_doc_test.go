package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// chartReadme is the chart's README; its values table is written from
// values.yaml's keys, defaults and comments.
const (
	chartReadme   = "helm/carve/README.md"
	chartValues   = "helm/carve/values.yaml"
	valuesMarker  = "<!-- values: written by TestChartReadmeValues from values.yaml; do not edit below -->\n"
	longDefault   = 60
	sectionMarker = "(section)"
)

// TestChartReadmeValues: the chart's README lists every value of
// values.yaml with its default and the comment above it, so the two
// cannot drift. CARVE_UPDATE_DOCS=1 rewrites the table.
func TestChartReadmeValues(t *testing.T) {
	src, err := os.ReadFile(chartValues)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	var rows []string
	valueRows(doc.Content[0], "", &rows)
	table := "| value | default | what it does |\n|---|---|---|\n" + strings.Join(rows, "")
	readme, err := os.ReadFile(chartReadme)
	if err != nil {
		t.Fatal(err)
	}
	head, _, found := strings.Cut(string(readme), valuesMarker)
	if !found {
		t.Fatalf("%s has no line %q", chartReadme, strings.TrimSpace(valuesMarker))
	}
	want := head + valuesMarker + table
	if os.Getenv("CARVE_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(chartReadme, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if string(readme) != want {
		t.Errorf("%s's values table is not values.yaml's: rewrite it with CARVE_UPDATE_DOCS=1 go test ./deploy -run TestChartReadmeValues", chartReadme)
	}
}

// valueRows appends a row for each key of mapping m (under prefix), and
// the rows of the mappings it holds.
func valueRows(m *yaml.Node, prefix string, rows *[]string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		key, val := m.Content[i], m.Content[i+1]
		path := prefix + key.Value
		doc := comment(key.HeadComment)
		if val.Kind == yaml.MappingNode && len(val.Content) > 0 {
			if doc != "" {
				*rows = append(*rows, fmt.Sprintf("| `%s` | %s | %s |\n", path, sectionMarker, doc))
			}
			valueRows(val, path+".", rows)
			continue
		}
		*rows = append(*rows, fmt.Sprintf("| `%s` | %s | %s |\n", path, defaultOf(val), doc))
	}
}

// comment turns a YAML head comment into one table cell.
func comment(c string) string {
	var words []string
	for _, line := range strings.Split(c, "\n") {
		words = append(words, strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "#"))...)
	}
	return strings.ReplaceAll(strings.Join(words, " "), "|", `\|`)
}

// defaultOf shows a value as compact JSON; a long one (the example
// classes) is only counted.
func defaultOf(n *yaml.Node) string {
	var v any
	if err := n.Decode(&v); err != nil {
		return "?"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	if len(b) > longDefault && n.Kind == yaml.SequenceNode {
		return fmt.Sprintf("%d entries (values.yaml)", len(n.Content))
	}
	return "`" + strings.ReplaceAll(string(b), "|", `\|`) + "`"
}
