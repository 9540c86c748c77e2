// Command release makes the files a Carve release publishes beside its
// images (scripts/release.sh runs it). It is a dispatcher of subcommands:
//
//	go run ./scripts/release sbom -rootfs DIR -binary PATH -name carve -version v0.1.0 -digest sha256:...
//	go run ./scripts/release pin -images DIR -kustomization FILE -values FILE
//
// Each subcommand is an entry of commands and a file of its own.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
)

// command is one subcommand: run gets the arguments after its name, the
// environment (os.Getenv; a map in tests) and where to write its output
// and its flags' usage.
type command struct {
	summary string
	run     func(args []string, getenv func(string) string, stdout, stderr io.Writer) error
}

var commands = map[string]command{
	"sbom": {summary: "write the image's software bill of materials (SPDX 2.3 JSON)", run: runSBOM},
	"pin":  {summary: "name every image of the kustomize base and the Helm values by digest", run: runPin},
}

// usageError is a mistake in how the command was called (exit 2), as
// opposed to a failure doing what it was asked (exit 1).
type usageError struct{ error }

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and turns its error into an exit code.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		_, _ = fmt.Fprint(stderr, usage())
		return 2
	}
	cmd, ok := commands[args[0]]
	if !ok {
		_, _ = fmt.Fprintf(stderr, "release: unknown subcommand %q\n%s", args[0], usage())
		return 2
	}
	err := cmd.run(args[1:], getenv, stdout, stderr)
	var usageErr usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usageErr):
		_, _ = fmt.Fprintf(stderr, "release %s: %v\n", args[0], err)
		return 2
	default:
		_, _ = fmt.Fprintf(stderr, "release %s: %v\n", args[0], err)
		return 1
	}
}

// usage lists the subcommands, sorted so the text does not depend on map
// order.
func usage() string {
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	s := "usage: go run ./scripts/release <subcommand> [flags]\n\nsubcommands:\n"
	for _, name := range names {
		s += fmt.Sprintf("  %-8s %s\n", name, commands[name].summary)
	}
	return s + "\nRun a subcommand with -h for its flags.\n"
}

// parseFlags parses a subcommand's flags; a bad flag is a usage error
// (the flag package has already printed what was wrong and the flags).
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments: %q", fs.Args())}
	}
	return nil
}
