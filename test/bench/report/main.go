// Command report prints a benchmark run's table (test/bench) and draws its
// plots: `go -C test/bench/report run . -in results.json -plots DIR` (paths
// from test/bench/report, or absolute). scripts/bench.sh runs it on the host
// after the VM has written the run. It is a Go module of its own, so that
// gonum/plot, which only its plots need, stays out of the driver's module
// graph; it reads the run with carve.dev/carve/test/bench/results and
// prints it with carve.dev/carve/test/bench/table, both from this checkout
// (go.mod's replace) and tested with the driver's unit tests.
package main

import (
	"flag"
	"fmt"
	"os"

	"carve.dev/carve/test/bench/results"
	"carve.dev/carve/test/bench/table"
)

func main() {
	// The default is the repository's _output/bench seen from this
	// module's directory, where `go -C test/bench/report run .` runs.
	in := flag.String("in", "../../../_output/bench/results.json", "the run's results")
	plots := flag.String("plots", "", "write the PNG plots into this directory (empty: none)")
	markdown := flag.Bool("markdown", false, "print the table as Markdown (docs/performance.md)")
	flag.Parse()
	if err := run(*in, *plots, *markdown); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(in, plots string, markdown bool) error {
	r, err := results.Read(in)
	if err != nil {
		return err
	}
	write := table.Print
	if markdown {
		write = table.Markdown
	}
	if err := write(os.Stdout, r); err != nil {
		return fmt.Errorf("print: %w", err)
	}
	if plots == "" {
		return nil
	}
	if err := os.MkdirAll(plots, 0o755); err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	return drawAll(r, plots)
}
