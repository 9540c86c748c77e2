package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"carve.dev/carve/test/bench/results"
)

var header = []string{"operation", "raw", "carve", "wipe", "ratio", "goal", "met?", "carve's lvm runs"}

// cells renders a row's columns; a figure that does not apply is "-".
func cells(r results.Row) []string {
	ratio := "-"
	if r.Raw != 0 {
		ratio = fmt.Sprintf("%.2f", r.Ratio())
	}
	return []string{r.Op, optional(r.Raw, r.Unit), figure(r.Carve, r.Unit), optional(r.Wipe, r.Unit), ratio, goal(r), met(r), lvmRuns(r)}
}

// lvmRuns counts the lvm2 runs among the commands Carve ran for one
// sample of the row, "-" when they were not counted.
func lvmRuns(r results.Row) string {
	if r.Commands == nil {
		return "-"
	}
	return fmt.Sprint(results.LVMRuns(r.Commands))
}

// optional is figure for a column a row may not have: "-" for 0.
func optional(v float64, unit string) string {
	if v == 0 {
		return "-"
	}
	return figure(v, unit)
}

// figure renders v in unit, "-" when there is none (0); a rate of 0 per
// minute is a figure.
func figure(v float64, unit string) string {
	switch {
	case unit == "/min":
		return fmt.Sprintf("%.1f/min", v)
	case v == 0:
		return "-"
	case unit == "s" && v < 1:
		return fmt.Sprintf("%.0f ms", v*1000)
	case unit == "s":
		return fmt.Sprintf("%.2f s", v)
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}

func goal(r results.Row) string {
	if r.Goal.Op == "" {
		return "-"
	}
	if r.Goal.Of == "ratio" {
		return fmt.Sprintf("ratio %s %g", r.Goal.Op, r.Goal.Value)
	}
	if r.Goal.Value == 0 {
		return fmt.Sprintf("%s 0", r.Goal.Op)
	}
	return fmt.Sprintf("%s %s", r.Goal.Op, figure(r.Goal.Value, r.Unit))
}

func met(r results.Row) string {
	m, ok := r.Met()
	switch {
	case !ok:
		return "-"
	case m:
		return "yes"
	}
	return "NO"
}

func title(r *results.Run) string {
	return fmt.Sprintf("Carve benchmark, %s run of %s, %s, kernel %s", r.Mode, r.Started.UTC().Format(time.DateTime),
		r.Duration.Round(time.Second), r.Kernel)
}

// printTable writes the table in aligned columns, for a terminal.
func printTable(w io.Writer, r *results.Run) error {
	var b strings.Builder
	b.WriteString(title(r) + "\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	_, _ = tw.Write([]byte(strings.Join(header, "\t") + "\n"))
	for _, row := range r.Rows {
		_, _ = tw.Write([]byte(strings.Join(cells(row), "\t") + "\n"))
	}
	_ = tw.Flush() // into a strings.Builder: cannot fail
	_, err := io.WriteString(w, b.String())
	return err
}

// printMarkdown writes the table for docs/performance.md.
func printMarkdown(w io.Writer, r *results.Run) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n| %s |\n|%s\n", title(r), strings.Join(header, " | "), strings.Repeat("---|", len(header)))
	for _, row := range r.Rows {
		b.WriteString("| " + strings.Join(cells(row), " | ") + " |\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
