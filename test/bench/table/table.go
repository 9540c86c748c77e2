// Package table renders a benchmark run (test/bench/results) as a table:
// aligned columns for a terminal, or Markdown for docs/performance.md.
// test/bench/report prints it; it stays in the driver's module, apart
// from the report's plots (a module of their own, for gonum/plot), so that
// its tests run with the unit tests.
package table

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"carve.dev/carve/test/bench/results"
)

var header = []string{"operation", "raw", "carve", "wipe", "ratio", "goal", "met?", "carve's lvm runs"}

// lvmdHeader is the table's header when a row has an lvmd figure (the
// lvmd section ran): lvmd's figure, Carve/lvmd and lvmd's lvm2 runs too.
var lvmdHeader = []string{"operation", "raw", "carve", "lvmd", "wipe", "ratio", "carve/lvmd", "goal", "met?", "carve's lvm runs", "lvmd's lvm runs"}

// withLVMD tells whether any row of the run has an lvmd figure.
func withLVMD(r *results.Run) bool {
	for _, row := range r.Rows {
		if row.LVMD != 0 {
			return true
		}
	}
	return false
}

func headerOf(r *results.Run) []string {
	if withLVMD(r) {
		return lvmdHeader
	}
	return header
}

// cells renders a row's columns; a figure that does not apply is "-".
func cells(r results.Row, lvmd bool) []string {
	if !lvmd {
		return []string{r.Op, optional(r.Raw, r.Unit), figure(r.Carve, r.Unit), optional(r.Wipe, r.Unit), ratio(r.Raw, r.Ratio()), goal(r), met(r), lvmRuns(r.Commands)}
	}
	return []string{r.Op, optional(r.Raw, r.Unit), figure(r.Carve, r.Unit), optional(r.LVMD, r.Unit), optional(r.Wipe, r.Unit),
		ratio(r.Raw, r.Ratio()), ratio(r.LVMD, r.LVMDRatio()), goal(r), met(r), lvmRuns(r.Commands), lvmRuns(r.LVMDCommands)}
}

// ratio renders v, "-" when the figure it divides by (of) is missing.
func ratio(of, v float64) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

// lvmRuns counts the lvm2 runs among the commands Carve (or lvmd) ran for
// one sample of the row, "-" when they were not counted.
func lvmRuns(commands map[string]float64) string {
	if commands == nil {
		return "-"
	}
	return fmt.Sprint(results.LVMRuns(commands))
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
	if r.Goal.Of == "lvmd" {
		return fmt.Sprintf("carve/lvmd %s %g", r.Goal.Op, r.Goal.Value)
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

// Print writes the table in aligned columns, for a terminal.
func Print(w io.Writer, r *results.Run) error {
	var b strings.Builder
	b.WriteString(title(r) + "\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	lvmd := withLVMD(r)
	_, _ = tw.Write([]byte(strings.Join(headerOf(r), "\t") + "\n"))
	for _, row := range r.Rows {
		_, _ = tw.Write([]byte(strings.Join(cells(row, lvmd), "\t") + "\n"))
	}
	_ = tw.Flush() // into a strings.Builder: cannot fail
	_, err := io.WriteString(w, b.String())
	return err
}

// Markdown writes the table for docs/performance.md.
func Markdown(w io.Writer, r *results.Run) error {
	var b strings.Builder
	h, lvmd := headerOf(r), withLVMD(r)
	fmt.Fprintf(&b, "%s\n\n| %s |\n|%s\n", title(r), strings.Join(h, " | "), strings.Repeat("---|", len(h)))
	for _, row := range r.Rows {
		b.WriteString("| " + strings.Join(cells(row, lvmd), " | ") + " |\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
