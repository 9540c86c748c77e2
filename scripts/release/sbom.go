package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// debDistro is the purl distro qualifier of the image's Debian packages:
// the Dockerfile's base is debian:bookworm-slim, Debian 12. It changes with
// that base.
const debDistro = "debian-12"

var (
	// digestRE is an image manifest digest as the registry gives it.
	digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	// imageNameRE is one component of an OCI repository name ("carve"):
	// it is the purl's name and part of the document namespace (a URI).
	imageNameRE = regexp.MustCompile(`^[a-z0-9]+(?:[._-][a-z0-9]+)*$`)
	// versionRE is a release version ("v0.1.0", "v0.2.0-rc.1+abc"),
	// also part of the document namespace.
	versionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]*$`)
)

// sbomOptions are the sbom subcommand's flags, checked.
type sbomOptions struct {
	rootfs, binary string
	name, version  string
	digestHex      string // the digest's 64 hex digits
	created        string // SPDX's form: UTC, to the second, "Z"
	out            string
}

// runSBOM writes the SPDX document of the image. Everything is read and
// checked before -out is written, so a failed run leaves no file behind
// and an old one is not truncated.
func runSBOM(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	opts, err := parseSBOMFlags(args, getenv, stderr)
	if err != nil {
		return err
	}
	debs, err := readDpkgStatus(opts.rootfs)
	if err != nil {
		return err
	}
	mods, err := readGoModules(opts.binary)
	if err != nil {
		return err
	}
	b, err := encodeJSON(buildSBOM(opts, mods, debs))
	if err != nil {
		return err
	}
	if opts.out == "" || opts.out == "-" {
		_, err = stdout.Write(b)
		return err
	}
	if err := os.WriteFile(opts.out, b, 0o644); err != nil {
		return fmt.Errorf("sbom: %w", err)
	}
	return nil
}

func parseSBOMFlags(args []string, getenv func(string) string, stderr io.Writer) (sbomOptions, error) {
	var o sbomOptions
	var digest, created string
	fs := flag.NewFlagSet("sbom", flag.ContinueOnError)
	fs.StringVar(&o.rootfs, "rootfs", "", "the image's unpacked root filesystem (required): its Debian packages are read from var/lib/dpkg/status")
	fs.StringVar(&o.binary, "binary", "", "the carve Go binary, in the rootfs (required): its modules are read from its Go build info")
	fs.StringVar(&o.name, "name", "carve", "the image's name")
	fs.StringVar(&o.version, "version", "", "the release version, e.g. v0.1.0 (required)")
	fs.StringVar(&digest, "digest", "", "the image manifest's digest, sha256:<64 hex> (required)")
	fs.StringVar(&created, "created", "", "the document's creation time, RFC 3339 (default: $SOURCE_DATE_EPOCH, Unix seconds)")
	fs.StringVar(&o.out, "out", "", "the file to write (default: stdout)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return o, err
	}
	for _, f := range []struct{ name, value string }{{"rootfs", o.rootfs}, {"binary", o.binary}, {"version", o.version}, {"digest", digest}} {
		if f.value == "" {
			return o, usageError{fmt.Errorf("-%s is required", f.name)}
		}
	}
	if !imageNameRE.MatchString(o.name) {
		return o, usageError{fmt.Errorf("-name %q: not an image name component like carve", o.name)}
	}
	if !versionRE.MatchString(o.version) {
		return o, usageError{fmt.Errorf("-version %q: not a version like v0.1.0", o.version)}
	}
	if !digestRE.MatchString(digest) {
		return o, usageError{fmt.Errorf("-digest %q: not sha256: and 64 lower-case hex digits", digest)}
	}
	o.digestHex = strings.TrimPrefix(digest, "sha256:")
	var err error
	if o.created, err = creationTime(created, getenv("SOURCE_DATE_EPOCH")); err != nil {
		return o, usageError{err}
	}
	return o, nil
}

// creationTime is the document's time: -created, else SOURCE_DATE_EPOCH.
// Never the clock: the same image must give the same bytes, so that the
// SBOM can be rebuilt and compared.
func creationTime(created, epoch string) (string, error) {
	var t time.Time
	switch {
	case created != "":
		var err error
		if t, err = time.Parse(time.RFC3339, created); err != nil {
			return "", fmt.Errorf("-created: %w", err)
		}
	case epoch != "":
		secs, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil || secs < 0 {
			return "", fmt.Errorf("SOURCE_DATE_EPOCH %q: not a count of seconds since 1970", epoch)
		}
		t = time.Unix(secs, 0)
	default:
		return "", fmt.Errorf("no creation time: give -created or set SOURCE_DATE_EPOCH (the SBOM must be reproducible, so it does not read the clock)")
	}
	// SPDX 2.3 wants YYYY-MM-DDThh:mm:ssZ: UTC, no fraction, no offset.
	return t.UTC().Format("2006-01-02T15:04:05Z"), nil
}

// encodeJSON indents the document and ends it with a newline. HTML
// escaping is off: purls hold '&', which would otherwise read \u0026.
func encodeJSON(doc document) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("sbom: %w", err)
	}
	return buf.Bytes(), nil
}

// buildSBOM makes the document: the image, then its Go modules, then its
// Debian packages, each contained in the image. mods come sorted; debs are
// sorted here.
func buildSBOM(o sbomOptions, mods []goModule, debs []debPackage) document {
	image := newPackage(imageID, o.name, o.version, "pkg:oci/"+purlEscape(o.name)+"@"+purlEscape("sha256:"+o.digestHex))
	image.Checksums = []checksum{{Algorithm: "SHA256", ChecksumValue: o.digestHex}}
	image.PrimaryPackagePurpose = "CONTAINER"
	pkgs := []spdxPackage{image}
	for i, m := range mods {
		p := newPackage(spdxID("Go", m.Path, i+1), m.Path, m.Version, goPurl(m.Path, m.Version))
		p.PrimaryPackagePurpose, p.Comment = m.Purpose, m.Comment
		pkgs = append(pkgs, p)
	}
	for i, d := range sortedDebs(debs) {
		p := newPackage(spdxID("Deb", d.Name, i+1), d.Name, d.Version, debPurl(d))
		p.SourceInfo = fmt.Sprintf("built from Debian source package %s %s", d.Source, d.SourceVersion)
		pkgs = append(pkgs, p)
	}
	rels := []relationship{{"SPDXRef-DOCUMENT", "DESCRIBES", imageID}}
	for _, p := range pkgs[1:] {
		rels = append(rels, relationship{imageID, "CONTAINS", p.SPDXID})
	}
	full := o.name + "-" + o.version
	return document{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              full,
		DocumentNamespace: "https://carve.dev/spdx/" + full + "-" + o.digestHex,
		CreationInfo:      creationInfo{Created: o.created, Creators: []string{"Tool: carve-release"}},
		DocumentDescribes: []string{imageID},
		Packages:          pkgs,
		Relationships:     rels,
	}
}

// sortedDebs orders the packages by name; the same name twice is a
// multi-arch package, ordered by architecture.
func sortedDebs(debs []debPackage) []debPackage {
	s := append([]debPackage(nil), debs...)
	sort.SliceStable(s, func(i, j int) bool {
		a, b := s[i], s[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if a.Arch != b.Arch {
			return a.Arch < b.Arch
		}
		return a.Version < b.Version
	})
	return s
}
