package main

import (
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

const (
	testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	testHex    = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// testStatus is the rootfs's dpkg status: out of order, with a package no
// longer installed, one built from another source and versions a purl
// must escape (an epoch's ':', a '+').
const testStatus = `Package: lvm2
Status: install ok installed
Architecture: amd64
Version: 2.03.16-2
Description: Linux Logical Volume Manager
 LVM2.

Package: removed
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0

Package: libdevmapper1.02.1
Status: install ok installed
Architecture: amd64
Source: lvm2 (2.03.16-2)
Version: 2:1.02.185-2+b1

Package: base-files
Status: install ok installed
Architecture: amd64
Version: 12.4+deb12u5
`

// The SPDX 2.3 document as read back: the names are the specification's,
// spelled again here rather than taken from the types that wrote it, so a
// misspelt tag shows.
type readDoc struct {
	SPDXVersion       string `json:"spdxVersion"`
	DataLicense       string `json:"dataLicense"`
	SPDXID            string `json:"SPDXID"`
	Name              string `json:"name"`
	DocumentNamespace string `json:"documentNamespace"`
	CreationInfo      struct {
		Created  string   `json:"created"`
		Creators []string `json:"creators"`
	} `json:"creationInfo"`
	DocumentDescribes []string `json:"documentDescribes"`
	Packages          []struct {
		Name                  string `json:"name"`
		SPDXID                string `json:"SPDXID"`
		VersionInfo           string `json:"versionInfo"`
		DownloadLocation      string `json:"downloadLocation"`
		FilesAnalyzed         *bool  `json:"filesAnalyzed"`
		LicenseConcluded      string `json:"licenseConcluded"`
		LicenseDeclared       string `json:"licenseDeclared"`
		CopyrightText         string `json:"copyrightText"`
		PrimaryPackagePurpose string `json:"primaryPackagePurpose"`
		SourceInfo            string `json:"sourceInfo"`
		Checksums             []struct {
			Algorithm     string `json:"algorithm"`
			ChecksumValue string `json:"checksumValue"`
		} `json:"checksums"`
		ExternalRefs []struct {
			ReferenceCategory string `json:"referenceCategory"`
			ReferenceType     string `json:"referenceType"`
			ReferenceLocator  string `json:"referenceLocator"`
		} `json:"externalRefs"`
	} `json:"packages"`
	Relationships []struct {
		SPDXElementID      string `json:"spdxElementId"`
		RelationshipType   string `json:"relationshipType"`
		RelatedSPDXElement string `json:"relatedSpdxElement"`
	} `json:"relationships"`
}

// validID is SPDX's idstring.
var validID = regexp.MustCompile(`^SPDXRef-[A-Za-z0-9.-]+$`)

func writeStatus(t *testing.T, rootfs, status string) {
	t.Helper()
	dir := filepath.Join(rootfs, "var", "lib", "dpkg")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// runRelease runs the command as main would and returns its exit code,
// stdout and stderr.
func runRelease(getenv func(string) string, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, getenv, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestSBOM writes the SBOM of a rootfs holding testStatus, with this test
// binary (which has Go build info) as the carve binary, and reads it back.
func TestSBOM(t *testing.T) {
	rootfs := t.TempDir()
	writeStatus(t, rootfs, testStatus)
	out := filepath.Join(t.TempDir(), "sbom.json")
	getenv := env(map[string]string{"SOURCE_DATE_EPOCH": "1700000000"})
	args := []string{"sbom", "-rootfs", rootfs, "-binary", os.Args[0], "-name", "carve", "-version", "v0.1.0", "-digest", testDigest}
	if code, _, stderr := runRelease(getenv, append(args, "-out", out)...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// Reproducible: a second run, to stdout this time, gives the same bytes.
	if code, stdout, stderr := runRelease(getenv, args...); code != 0 || stdout != string(b) {
		t.Errorf("second run (exit %d, %s) differs from the first:\n%s\n---\n%s", code, stderr, stdout, b)
	}
	if !bytes.HasSuffix(b, []byte("}\n")) || !bytes.HasPrefix(b, []byte("{\n  \"spdxVersion\"")) {
		t.Errorf("not indented JSON ending in a newline:\n%s", b)
	}
	var doc readDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	checkDocument(t, doc)
	checkPackages(t, doc)
	checkRelationships(t, doc)
}

func checkDocument(t *testing.T, doc readDoc) {
	t.Helper()
	for _, c := range []struct{ field, got, want string }{
		{"spdxVersion", doc.SPDXVersion, "SPDX-2.3"},
		{"dataLicense", doc.DataLicense, "CC0-1.0"},
		{"SPDXID", doc.SPDXID, "SPDXRef-DOCUMENT"},
		{"name", doc.Name, "carve-v0.1.0"},
		{"documentNamespace", doc.DocumentNamespace, "https://carve.dev/spdx/carve-v0.1.0-" + testHex},
		{"created", doc.CreationInfo.Created, "2023-11-14T22:13:20Z"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.field, c.got, c.want)
		}
	}
	if !slices.Equal(doc.CreationInfo.Creators, []string{"Tool: carve-release"}) || !slices.Equal(doc.DocumentDescribes, []string{"SPDXRef-Image"}) {
		t.Errorf("creators %q, documentDescribes %q", doc.CreationInfo.Creators, doc.DocumentDescribes)
	}
}

// checkPackages: the image first, then the Go modules, then the Debian
// packages by name; every package's ID valid and unique, its unknowns
// NOASSERTION and its purl given.
func checkPackages(t *testing.T, doc readDoc) {
	t.Helper()
	ids := map[string]bool{}
	var purls []string
	for _, p := range doc.Packages {
		if !validID.MatchString(p.SPDXID) || ids[p.SPDXID] {
			t.Errorf("package %s: SPDXID %q is not valid or not unique", p.Name, p.SPDXID)
		}
		ids[p.SPDXID] = true
		if p.DownloadLocation != noAssertion || p.LicenseConcluded != noAssertion || p.LicenseDeclared != noAssertion ||
			p.CopyrightText != noAssertion || p.FilesAnalyzed == nil || *p.FilesAnalyzed {
			t.Errorf("package %s: not NOASSERTION everywhere with filesAnalyzed false: %+v", p.Name, p)
		}
		if len(p.ExternalRefs) != 1 || p.ExternalRefs[0].ReferenceCategory != "PACKAGE-MANAGER" || p.ExternalRefs[0].ReferenceType != "purl" {
			t.Fatalf("package %s: external refs %+v, want one purl", p.Name, p.ExternalRefs)
		}
		purls = append(purls, p.ExternalRefs[0].ReferenceLocator)
	}
	image := doc.Packages[0]
	if image.SPDXID != "SPDXRef-Image" || image.Name != "carve" || image.VersionInfo != "v0.1.0" || image.PrimaryPackagePurpose != "CONTAINER" ||
		len(image.Checksums) != 1 || image.Checksums[0].Algorithm != "SHA256" || image.Checksums[0].ChecksumValue != testHex {
		t.Errorf("first package is not the image: %+v", image)
	}
	// This test binary's modules: its main module, its dependencies (as
	// its own build info lists them) and the standard library.
	want := []string{"pkg:oci/carve@sha256%3A" + testHex, "pkg:golang/carve.dev/carve@%28devel%29"}
	info, err := buildinfo.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range info.Deps {
		want = append(want, "pkg:golang/"+d.Path+"@"+d.Version)
	}
	want = append(want, "pkg:golang/stdlib@"+goVersion(runtime.Version()),
		"pkg:deb/debian/base-files@12.4%2Bdeb12u5?arch=amd64&distro=debian-12",
		"pkg:deb/debian/libdevmapper1.02.1@2%3A1.02.185-2%2Bb1?arch=amd64&distro=debian-12",
		"pkg:deb/debian/lvm2@2.03.16-2?arch=amd64&distro=debian-12")
	if !slices.Equal(purls, want) {
		t.Errorf("purls\n%s\nwant\n%s", strings.Join(purls, "\n"), strings.Join(want, "\n"))
	}
	for _, p := range doc.Packages {
		if p.Name == "libdevmapper1.02.1" && p.SourceInfo != "built from Debian source package lvm2 2.03.16-2" {
			t.Errorf("libdevmapper's sourceInfo = %q", p.SourceInfo)
		}
	}
}

// checkRelationships: the document describes the image, and the image
// contains every other package, once.
func checkRelationships(t *testing.T, doc readDoc) {
	t.Helper()
	rels := doc.Relationships
	if len(rels) != len(doc.Packages) {
		t.Fatalf("%d relationships for %d packages", len(rels), len(doc.Packages))
	}
	if r := rels[0]; r.SPDXElementID != "SPDXRef-DOCUMENT" || r.RelationshipType != "DESCRIBES" || r.RelatedSPDXElement != "SPDXRef-Image" {
		t.Errorf("first relationship %+v, want DOCUMENT DESCRIBES Image", r)
	}
	for i, p := range doc.Packages[1:] {
		if r := rels[i+1]; r.SPDXElementID != "SPDXRef-Image" || r.RelationshipType != "CONTAINS" || r.RelatedSPDXElement != p.SPDXID {
			t.Errorf("relationship %+v, want Image CONTAINS %s", r, p.SPDXID)
		}
	}
}

// TestSBOMRefusals: a bad flag or no creation time is an error before
// anything is written: -out does not appear.
func TestSBOMRefusals(t *testing.T) {
	rootfs := t.TempDir()
	writeStatus(t, rootfs, testStatus)
	epoch := env(map[string]string{"SOURCE_DATE_EPOCH": "1700000000"})
	for _, c := range []struct {
		name    string
		getenv  func(string) string
		args    []string
		wantErr string
	}{
		{"digest of upper-case hex", epoch, []string{"-digest", "sha256:" + strings.ToUpper(testHex)}, "-digest"},
		{"short digest", epoch, []string{"-digest", testDigest[:70]}, "-digest"},
		{"digest of another algorithm", epoch, []string{"-digest", "sha512:" + testHex}, "-digest"},
		{"digest without its algorithm", epoch, []string{"-digest", testHex}, "-digest"},
		{"no creation time", env(nil), nil, "SOURCE_DATE_EPOCH"},
		{"SOURCE_DATE_EPOCH not a number", env(map[string]string{"SOURCE_DATE_EPOCH": "yesterday"}), nil, "SOURCE_DATE_EPOCH"},
		{"-created not RFC 3339", epoch, []string{"-created", "2024-01-02"}, "-created"},
		{"no -version", epoch, []string{"-version", ""}, "-version is required"},
		{"-name with a slash", epoch, []string{"-name", "ghcr.io/carve"}, "-name"},
		{"a stray argument", epoch, []string{"extra"}, "unexpected arguments"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "sbom.json")
			args := []string{"sbom", "-rootfs", rootfs, "-binary", os.Args[0], "-version", "v0.1.0", "-digest", testDigest, "-out", out}
			code, stdout, stderr := runRelease(c.getenv, append(args, c.args...)...)
			if code != 2 || !strings.Contains(stderr, c.wantErr) || stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and an error naming %s", code, stdout, stderr, c.wantErr)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("-out was written (%v)", err)
			}
		})
	}
}

// TestSBOMReadErrors: a rootfs without dpkg's status, or a binary that is
// not Go's, fails (exit 1) saying which file.
func TestSBOMReadErrors(t *testing.T) {
	rootfs := t.TempDir()
	epoch := env(map[string]string{"SOURCE_DATE_EPOCH": "0"})
	args := []string{"sbom", "-rootfs", rootfs, "-binary", os.Args[0], "-version", "v0.1.0", "-digest", testDigest}
	if code, _, stderr := runRelease(epoch, args...); code != 1 || !strings.Contains(stderr, "dpkg status") {
		t.Errorf("no status file: exit %d, %s", code, stderr)
	}
	writeStatus(t, rootfs, testStatus)
	notGo := filepath.Join(rootfs, "var", "lib", "dpkg", "status")
	args[4] = notGo
	if code, _, stderr := runRelease(epoch, args...); code != 1 || !strings.Contains(stderr, "go build info "+notGo) {
		t.Errorf("a binary without build info: exit %d, %s", code, stderr)
	}
}

func TestSubcommands(t *testing.T) {
	if code, _, stderr := runRelease(env(nil)); code != 2 || !strings.Contains(stderr, "sbom") {
		t.Errorf("no subcommand: exit %d, %q; want 2 and the usage", code, stderr)
	}
	if code, _, stderr := runRelease(env(nil), "nope"); code != 2 || !strings.Contains(stderr, `unknown subcommand "nope"`) {
		t.Errorf("unknown subcommand: exit %d, %q; want 2", code, stderr)
	}
}

// TestGoModulesOfABinary builds a program with a dependency (this test
// binary has none: the command uses the standard library only) and reads
// its modules. The dependency is a local module put in with a replace
// directive, so the build needs no network and exercises Replace.
func TestGoModulesOfABinary(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"go.mod":     "module example.com/tiny\n\ngo 1.26\n\nrequire example.com/dep v1.2.3\n\nreplace example.com/dep => ./dep\n",
		"main.go":    "package main\n\nimport \"example.com/dep\"\n\nfunc main() { dep.Hello() }\n",
		"dep/go.mod": "module example.com/dep\n\ngo 1.26\n",
		"dep/dep.go": "package dep\n\nimport \"fmt\"\n\nfunc Hello() { fmt.Println(\"hello\") }\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "tiny")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS=-trimpath -buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	mods, err := readGoModules(bin)
	if err != nil {
		t.Fatal(err)
	}
	doc := buildSBOM(sbomOptions{name: "tiny", version: "v1", digestHex: testHex, created: "2024-01-01T00:00:00Z"}, mods, nil)
	var purls []string
	for _, p := range doc.Packages[1:] {
		purls = append(purls, p.ExternalRefs[0].ReferenceLocator)
		if p.Name == "example.com/dep" && !strings.Contains(p.Comment, "replaced by a local directory") {
			t.Errorf("the replaced dependency's comment is %q", p.Comment)
		}
	}
	// The go on PATH built it: its release may differ from this test's.
	if len(purls) != 3 || purls[0] != "pkg:golang/example.com/dep@%28devel%29" || purls[1] != "pkg:golang/example.com/tiny@%28devel%29" ||
		!strings.HasPrefix(purls[2], "pkg:golang/stdlib@go1.") {
		t.Errorf("purls %q, want the dependency, the main module and the standard library", purls)
	}
}

// TestGoModules: a replacement's path and version are what the SBOM
// names, the list is sorted, and a build's experiments are not part of
// the Go version.
func TestGoModules(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8 X:nodwarf5",
		Main:      debug.Module{Path: "carve.dev/carve", Version: "(devel)"},
		Deps: []*debug.Module{
			{Path: "k8s.io/klog/v2", Version: "v2.140.0"},
			{Path: "github.com/a/b", Version: "v1.0.0", Replace: &debug.Module{Path: "github.com/fork/b", Version: "v1.0.1"}},
			{Path: "example.com/local", Version: "v0.3.0", Replace: &debug.Module{Path: "../local", Version: "(devel)"}},
		},
	}
	got := goModules(bi)
	want := []goModule{
		{Path: "carve.dev/carve", Version: "(devel)", Purpose: "APPLICATION"},
		{Path: "example.com/local", Version: "(devel)", Purpose: "LIBRARY", Comment: "example.com/local v0.3.0 replaced by a local directory"},
		{Path: "github.com/fork/b", Version: "v1.0.1", Purpose: "LIBRARY", Comment: "replaces github.com/a/b v1.0.0"},
		{Path: "k8s.io/klog/v2", Version: "v2.140.0", Purpose: "LIBRARY"},
		{Path: "stdlib", Version: "go1.26.8", Purpose: "LIBRARY"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestSPDXIDAndPurls(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{spdxID("Go", "github.com/Masterminds/semver/v3", 2), "SPDXRef-Go-github.com-Masterminds-semver-v3-2"},
		{spdxID("Deb", "libstdc++6", 7), "SPDXRef-Deb-libstdc--6-7"},
		{spdxID("Deb", "é_x", 1), "SPDXRef-Deb---x-1"},
		{goPurl("github.com/Masterminds/semver/v3", "v3.5.0"), "pkg:golang/github.com/Masterminds/semver/v3@v3.5.0"},
		{goPurl("example.com/a@b", "v2.0.0+incompatible"), "pkg:golang/example.com/a%40b@v2.0.0%2Bincompatible"},
		{debPurl(debPackage{Name: "libstdc++6", Version: "12.2.0-14", Arch: "amd64"}), "pkg:deb/debian/libstdc%2B%2B6@12.2.0-14?arch=amd64&distro=debian-12"},
		{debPurl(debPackage{Name: "a", Version: "1:1.0~rc1"}), "pkg:deb/debian/a@1%3A1.0~rc1?distro=debian-12"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
		if strings.HasPrefix(c.got, "SPDXRef-") && !validID.MatchString(c.got) {
			t.Errorf("%q is not a valid SPDX ID", c.got)
		}
	}
}

// TestCreationTime: -created wins over SOURCE_DATE_EPOCH, and either is
// written in SPDX's form, in UTC.
func TestCreationTime(t *testing.T) {
	for _, c := range []struct{ created, epoch, want string }{
		{"2024-05-06T07:08:09.5+02:00", "1700000000", "2024-05-06T05:08:09Z"},
		{"", "1700000000", "2023-11-14T22:13:20Z"},
		{"", "0", "1970-01-01T00:00:00Z"},
	} {
		got, err := creationTime(c.created, c.epoch)
		if err != nil || got != c.want {
			t.Errorf("creationTime(%q, %q) = %q, %v; want %q", c.created, c.epoch, got, err, c.want)
		}
	}
	for _, epoch := range []string{"", "-1", "1.5", "x"} {
		if got, err := creationTime("", epoch); err == nil {
			t.Errorf("SOURCE_DATE_EPOCH %q: %q, want an error", epoch, got)
		}
	}
}
