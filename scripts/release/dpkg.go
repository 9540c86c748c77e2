package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"
)

// debPackage is an installed Debian package, as dpkg records it.
type debPackage struct {
	Name, Version, Arch string
	// Source and SourceVersion name the source package it was built
	// from: the package's own name and version when the stanza has no
	// Source field (dpkg omits it when they are the same).
	Source, SourceVersion string
}

// installed is the Status of a package that is on the image; others
// (removed with their configuration kept, half-installed, ...) are not
// part of what the image ships.
const installed = "install ok installed"

// readDpkgStatus reads the installed packages of the root filesystem at
// rootfs.
func readDpkgStatus(rootfs string) ([]debPackage, error) {
	path := filepath.Join(rootfs, "var", "lib", "dpkg", "status")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("dpkg status: %w", err)
	}
	pkgs, err := parseDpkgStatus(b)
	if err != nil {
		return nil, fmt.Errorf("dpkg status %s: %w", path, err)
	}
	return pkgs, nil
}

// stanza is one paragraph of the status file: its fields by lower-case
// name (field names are case-insensitive), and the line it starts on for
// errors.
type stanza struct {
	line   int
	fields map[string]string
}

// parseDpkgStatus parses a dpkg status file (deb822: paragraphs of
// "Field: value" lines separated by blank lines, a value continued on
// lines that start with a space or tab) and returns its installed
// packages.
func parseDpkgStatus(data []byte) ([]debPackage, error) {
	stanzas, err := splitStanzas(string(data))
	if err != nil {
		return nil, err
	}
	var pkgs []debPackage
	for _, s := range stanzas {
		p, ok, err := s.pkg()
		if err != nil {
			return nil, fmt.Errorf("stanza at line %d: %w", s.line, err)
		}
		if ok {
			pkgs = append(pkgs, p)
		}
	}
	return pkgs, nil
}

// splitStanzas reads the paragraphs and their fields. Lines of only
// spaces and tabs separate paragraphs too, as Debian policy lets parsers
// accept.
func splitStanzas(text string) ([]stanza, error) {
	var stanzas []stanza
	var fields map[string]string // the current stanza's; nil between stanzas
	last := ""                   // the field a continuation line belongs to
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		switch {
		case strings.TrimLeft(line, " \t") == "":
			fields, last = nil, ""
		case line[0] == ' ' || line[0] == '\t':
			if fields == nil {
				return nil, fmt.Errorf("line %d: continuation line before any field", n)
			}
			fields[last] += "\n" + strings.TrimSpace(line)
		default:
			name, value, ok := strings.Cut(line, ":")
			if !ok || name == "" || strings.ContainsAny(name, " \t") {
				return nil, fmt.Errorf("line %d: %q is not a \"Field: value\" line", n, line)
			}
			if fields == nil {
				fields = map[string]string{}
				stanzas = append(stanzas, stanza{line: n, fields: fields})
			}
			last = strings.ToLower(name)
			if _, dup := fields[last]; dup {
				return nil, fmt.Errorf("line %d: field %s given twice", n, name)
			}
			fields[last] = strings.TrimSpace(value)
		}
	}
	return stanzas, nil
}

// pkg reads a stanza's package; ok is false for a package that is not
// installed. Every stanza names its package and status; an installed one
// also has a version.
func (s stanza) pkg() (p debPackage, ok bool, err error) {
	name, err := s.word("Package")
	if err != nil {
		return p, false, err
	}
	status, found := s.fields["status"]
	if !found {
		return p, false, fmt.Errorf("package %s has no Status", name)
	}
	if strings.Join(strings.Fields(status), " ") != installed {
		return p, false, nil
	}
	p = debPackage{Name: name, Arch: s.fields["architecture"]}
	if p.Version, err = s.word("Version"); err != nil {
		return p, false, fmt.Errorf("package %s: %w", name, err)
	}
	if p.Arch != "" && !oneWord(p.Arch) {
		return p, false, fmt.Errorf("package %s: Architecture %q is not one word", name, p.Arch)
	}
	if p.Source, p.SourceVersion, err = parseSource(s.fields["source"], p.Name, p.Version); err != nil {
		return p, false, fmt.Errorf("package %s: %w", name, err)
	}
	return p, true, nil
}

// word reads a field that must be present and a single word (a package
// name or version never holds spaces; one that did would break the purl).
func (s stanza) word(field string) (string, error) {
	v, ok := s.fields[strings.ToLower(field)]
	if !ok || v == "" {
		return "", fmt.Errorf("no %s", field)
	}
	if !oneWord(v) {
		return "", fmt.Errorf("%s %q is not one word", field, v)
	}
	return v, nil
}

// parseSource reads a Source field: "name" or "name (version)", the
// latter when the source version differs from the binary package's
// (binNMUs, for one). Empty means the package is its own source.
func parseSource(field, name, version string) (string, string, error) {
	if field == "" {
		return name, version, nil
	}
	bad := fmt.Errorf("field Source: %q is not \"name\" or \"name (version)\"", field)
	src, rest, _ := strings.Cut(field, " ")
	rest = strings.TrimSpace(rest)
	if !oneWord(src) || strings.ContainsAny(src, "()") {
		return "", "", bad
	}
	if rest == "" {
		return src, version, nil
	}
	inner, open := strings.CutPrefix(rest, "(")
	inner, closed := strings.CutSuffix(inner, ")")
	if open && closed && oneWord(inner) && !strings.ContainsAny(inner, "()") {
		return src, inner, nil
	}
	return "", "", bad
}

// oneWord tells a non-empty value without spaces or control characters
// (a carriage return included): what a package name, version or
// architecture always is.
func oneWord(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r)
	})
}
