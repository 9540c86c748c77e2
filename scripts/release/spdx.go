package main

import (
	"fmt"
	"strconv"
	"strings"
)

// The SPDX 2.3 JSON document, with the fields this SBOM fills, in the
// order the specification's examples give them.
type document struct {
	SPDXVersion       string         `json:"spdxVersion"`
	DataLicense       string         `json:"dataLicense"`
	SPDXID            string         `json:"SPDXID"`
	Name              string         `json:"name"`
	DocumentNamespace string         `json:"documentNamespace"`
	CreationInfo      creationInfo   `json:"creationInfo"`
	DocumentDescribes []string       `json:"documentDescribes"`
	Packages          []spdxPackage  `json:"packages"`
	Relationships     []relationship `json:"relationships"`
}

type creationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name                  string        `json:"name"`
	SPDXID                string        `json:"SPDXID"`
	VersionInfo           string        `json:"versionInfo,omitempty"`
	DownloadLocation      string        `json:"downloadLocation"`
	FilesAnalyzed         bool          `json:"filesAnalyzed"`
	LicenseConcluded      string        `json:"licenseConcluded"`
	LicenseDeclared       string        `json:"licenseDeclared"`
	CopyrightText         string        `json:"copyrightText"`
	Checksums             []checksum    `json:"checksums,omitempty"`
	PrimaryPackagePurpose string        `json:"primaryPackagePurpose,omitempty"`
	SourceInfo            string        `json:"sourceInfo,omitempty"`
	Comment               string        `json:"comment,omitempty"`
	ExternalRefs          []externalRef `json:"externalRefs"`
}

type checksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type externalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type relationship struct {
	SPDXElementID      string `json:"spdxElementId"`
	RelationshipType   string `json:"relationshipType"`
	RelatedSPDXElement string `json:"relatedSpdxElement"`
}

const (
	imageID = "SPDXRef-Image"
	// noAssertion is SPDX's "not looked at": the SBOM lists what the
	// image holds, and makes no claim on where it came from or its
	// licenses.
	noAssertion = "NOASSERTION"
)

// newPackage is a package identified by its purl, with every field this
// SBOM does not determine set to NOASSERTION.
func newPackage(id, name, version, purl string) spdxPackage {
	return spdxPackage{
		Name:             name,
		SPDXID:           id,
		VersionInfo:      version,
		DownloadLocation: noAssertion,
		LicenseConcluded: noAssertion,
		LicenseDeclared:  noAssertion,
		CopyrightText:    noAssertion,
		ExternalRefs:     []externalRef{{"PACKAGE-MANAGER", "purl", purl}},
	}
}

// spdxID is "SPDXRef-<kind>-<name>-<n>". SPDX IDs hold only letters,
// digits, '.' and '-', so every other character of name becomes '-'; two
// names can then give the same text, and n (the package's position in
// its sorted list) keeps the IDs unique.
func spdxID(kind, name string, n int) string {
	clean := strings.Map(func(r rune) rune {
		if r < 128 && (r == '.' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, name)
	return "SPDXRef-" + kind + "-" + clean + "-" + strconv.Itoa(n)
}

// purlEscape percent-encodes all but the URL's unreserved characters, as
// the purl specification lets every component be: ':' in a digest or a
// Debian epoch, '+' in a version, '(' in Go's "(devel)".
func purlEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '-' || c == '.' || c == '_' || c == '~' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// goPurl is pkg:golang/<module path>@<version>: the path's segments are
// the purl's namespace and name, each escaped on its own so the slashes
// stay.
func goPurl(path, version string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = purlEscape(s)
	}
	purl := "pkg:golang/" + strings.Join(segs, "/")
	if version != "" {
		purl += "@" + purlEscape(version)
	}
	return purl
}

// debPurl is pkg:deb/debian/<name>@<version>?arch=<arch>&distro=debian-12,
// the qualifiers in the sorted order the purl specification asks for.
func debPurl(d debPackage) string {
	purl := "pkg:deb/debian/" + purlEscape(d.Name) + "@" + purlEscape(d.Version) + "?"
	if d.Arch != "" {
		purl += "arch=" + purlEscape(d.Arch) + "&"
	}
	return purl + "distro=" + debDistro
}
