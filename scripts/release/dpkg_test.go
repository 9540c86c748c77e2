package main

import (
	"reflect"
	"strings"
	"testing"
	"unicode"
)

// dpkgCases are status files and what parseDpkgStatus makes of them: the
// packages, or an error holding wantErr.
var dpkgCases = []struct {
	name    string
	status  string
	want    []debPackage
	wantErr string
}{
	{
		name:   "empty",
		status: "",
	},
	{
		name: "stanzas with continuation lines",
		status: `Package: lvm2
Status: install ok installed
Priority: optional
Architecture: amd64
Version: 2.03.16-2
Conffiles:
 /etc/lvm/lvm.conf 0123456789abcdef
 /etc/lvm/lvmlocal.conf fedcba9876543210
Description: Linux Logical Volume Manager
 This is LVM2, the rewrite of The Linux Logical Volume Manager.
 .
 LVM supports enterprise level volume management.

Package: kmod
Status: install ok installed
Architecture: amd64
Version: 30+20221128-1
Description: tools for managing Linux kernel modules
	a continuation line may start with a tab too
`,
		want: []debPackage{
			{Name: "lvm2", Version: "2.03.16-2", Arch: "amd64", Source: "lvm2", SourceVersion: "2.03.16-2"},
			{Name: "kmod", Version: "30+20221128-1", Arch: "amd64", Source: "kmod", SourceVersion: "30+20221128-1"},
		},
	},
	{
		name:   "blank lines of spaces, several and at the ends, no final newline",
		status: "\n\nPackage: a\nStatus: install ok installed\nVersion: 1\n \t\n\n\nPackage: b\nStatus: install ok installed\nVersion: 2",
		want: []debPackage{
			{Name: "a", Version: "1", Source: "a", SourceVersion: "1"},
			{Name: "b", Version: "2", Source: "b", SourceVersion: "2"},
		},
	},
	{
		name: "packages not installed are skipped, even without a version",
		status: `Package: old
Status: deinstall ok config-files
Version: 1.0
Architecture: amd64

Package: never
Status: purge ok not-installed
Priority: optional

Package: half
Status: install reinstreq half-installed
Version: 2.0

Package: kept
Status: install ok installed
Architecture: all
Version: 3.0
`,
		want: []debPackage{{Name: "kept", Version: "3.0", Arch: "all", Source: "kept", SourceVersion: "3.0"}},
	},
	{
		name: "source with and without its version",
		status: `Package: libdevmapper1.02.1
Status: install ok installed
Architecture: amd64
Source: lvm2 (2.03.16-2)
Version: 2:1.02.185-2

Package: libcryptsetup12
Status: install ok installed
Architecture: amd64
Source: cryptsetup
Version: 2:2.6.1-4~deb12u2
`,
		want: []debPackage{
			{Name: "libdevmapper1.02.1", Version: "2:1.02.185-2", Arch: "amd64", Source: "lvm2", SourceVersion: "2.03.16-2"},
			{Name: "libcryptsetup12", Version: "2:2.6.1-4~deb12u2", Arch: "amd64", Source: "cryptsetup", SourceVersion: "2:2.6.1-4~deb12u2"},
		},
	},
	{
		name:   "field names are case-insensitive",
		status: "package: a\nSTATUS: install  ok  installed\nversion: 1\n",
		want:   []debPackage{{Name: "a", Version: "1", Source: "a", SourceVersion: "1"}},
	},
	{
		name:    "no Package",
		status:  "Status: install ok installed\nVersion: 1\n",
		wantErr: "stanza at line 1: no Package",
	},
	{
		name:    "installed without a Version",
		status:  "Package: a\nStatus: install ok installed\nVersion: 1\n\nPackage: b\nStatus: install ok installed\nArchitecture: amd64\n",
		wantErr: "stanza at line 5: package b: no Version",
	},
	{
		name:    "empty Version",
		status:  "Package: a\nStatus: install ok installed\nVersion:\n",
		wantErr: "no Version",
	},
	{
		name:    "no Status",
		status:  "Package: a\nVersion: 1\n",
		wantErr: "package a has no Status",
	},
	{
		name:    "continuation line first",
		status:  " Package: a\nStatus: install ok installed\nVersion: 1\n",
		wantErr: "line 1: continuation line before any field",
	},
	{
		name:    "continuation line first after a blank line",
		status:  "Package: a\nStatus: install ok installed\nVersion: 1\n\n more\n",
		wantErr: "line 5: continuation line before any field",
	},
	{
		name:    "a line that is no field",
		status:  "Package: a\nthis is not a field\n",
		wantErr: `line 2: "this is not a field" is not a "Field: value" line`,
	},
	{
		name:    "empty field name",
		status:  "Package: a\n: value\n",
		wantErr: "line 2:",
	},
	{
		name:    "a field twice",
		status:  "Package: a\nVersion: 1\nVersion: 2\n",
		wantErr: "line 3: field Version given twice",
	},
	{
		name:    "a version of two words",
		status:  "Package: a\nStatus: install ok installed\nVersion: 1 2\n",
		wantErr: `Version "1 2" is not one word`,
	},
	{
		name:    "a package continued on a second line",
		status:  "Package: a\n b\nStatus: install ok installed\nVersion: 1\n",
		wantErr: "is not one word",
	},
	{
		name:    "source version without its closing parenthesis",
		status:  "Package: a\nStatus: install ok installed\nVersion: 1\nSource: b (2\n",
		wantErr: `package a: field Source: "b (2" is not "name" or "name (version)"`,
	},
	{
		name:    "source version without parentheses",
		status:  "Package: a\nStatus: install ok installed\nVersion: 1\nSource: b 2\n",
		wantErr: "Source",
	},
	{
		name:    "source with an empty version",
		status:  "Package: a\nStatus: install ok installed\nVersion: 1\nSource: b ()\n",
		wantErr: "Source",
	},
}

func TestParseDpkgStatus(t *testing.T) {
	for _, tc := range dpkgCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseDpkgStatus([]byte(tc.status))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q (packages %+v)", err, tc.wantErr, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestReadDpkgStatusNamesTheFile: an error says which file it is about.
func TestReadDpkgStatusNamesTheFile(t *testing.T) {
	rootfs := t.TempDir()
	if _, err := readDpkgStatus(rootfs); err == nil || !strings.Contains(err.Error(), "dpkg status") {
		t.Errorf("no status file: error %v", err)
	}
	writeStatus(t, rootfs, "Package: a\n")
	_, err := readDpkgStatus(rootfs)
	if err == nil || !strings.Contains(err.Error(), "var/lib/dpkg/status: stanza at line 1: package a has no Status") {
		t.Errorf("bad status file: error %v", err)
	}
}

// FuzzDpkgStatus: no input makes the parser panic, and every package it
// returns can be named in a purl (a name and a version, each one word).
// The committed corpus (testdata/fuzz/FuzzDpkgStatus) holds status files
// shaped like the image's; the table's cases are seeds too.
func FuzzDpkgStatus(f *testing.F) {
	for _, tc := range dpkgCases {
		f.Add([]byte(tc.status))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pkgs, err := parseDpkgStatus(data)
		if err != nil {
			return
		}
		for _, p := range pkgs {
			for _, v := range []string{p.Name, p.Version, p.Source, p.SourceVersion} {
				if v == "" || strings.ContainsFunc(v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
					t.Fatalf("package %+v: empty or not one word: %q", p, v)
				}
			}
		}
	})
}
