package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// versions are the pins of scripts/k8s/versions.sh, which the shell
// scripts source; the tool reads the same file rather than a copy, so
// there is one place to change a version.
type versions struct {
	vars   map[string]string
	arrays map[string][]string
}

// assignment is a top-level NAME=VALUE line of versions.sh.
var assignment = regexp.MustCompile(`^([A-Z][A-Z0-9_]*)=(.*)$`)

// required are the pins the tool uses; a file without one is refused
// rather than building with an empty version.
var required = []string{"K8S_RECIPE", "K8S_MODULE", "K8S_VERSION", "ETCD_MODULE", "ETCD_VERSION",
	"PROVISIONER_MODULE", "PROVISIONER_VERSION", "ATTACHER_MODULE", "ATTACHER_VERSION",
	"RESIZER_MODULE", "RESIZER_VERSION", "SNAPSHOTTER_MODULE", "SNAPSHOTTER_VERSION",
	"SNAPSHOT_CRD_MODULE", "SNAPSHOT_CRD_VERSION", "SNAPSHOT_CRD_DIR", "HELM_MODULE", "HELM_VERSION"}

// parseVersions reads the plain assignments of versions.sh: a word, a
// $NAME of an earlier one, or an array of words (single quotes allowed).
// The derived ones (cache paths, the key: "${...}", "$(...)") are skipped:
// the tool derives them itself, and its test holds them to the shell's.
func parseVersions(src string) (versions, error) {
	v := versions{vars: map[string]string{}, arrays: map[string][]string{}}
	for _, line := range strings.Split(src, "\n") {
		m := assignment.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name, val := m[1], m[2]
		switch {
		case strings.HasPrefix(val, "(") && strings.HasSuffix(val, ")"):
			for _, w := range strings.Fields(val[1 : len(val)-1]) {
				v.arrays[name] = append(v.arrays[name], strings.Trim(w, "'"))
			}
		case strings.HasPrefix(val, "$"):
			if ref, ok := v.vars[val[1:]]; ok {
				v.vars[name] = ref
			}
		default:
			v.vars[name] = val
		}
	}
	for _, r := range required {
		if v.vars[r] == "" {
			return v, fmt.Errorf("versions.sh: no %s", r)
		}
	}
	return v, nil
}

// get is a pin parseVersions checked for.
func (v versions) get(name string) string { return v.vars[name] }

// at is MODULE@VERSION for the pin pair NAME_MODULE, NAME_VERSION.
func (v versions) at(name string) string {
	return v.vars[name+"_MODULE"] + "@" + v.vars[name+"_VERSION"]
}

// key names the cache directory of this set of pins, as versions.sh's
// K8S_KEY does (the shell scripts find the binaries through it): the
// Kubernetes version, readable, and a hash of the pins.
func (v versions) key() string {
	pins := "recipe=" + v.get("K8S_RECIPE") + "\n"
	for _, p := range []string{"ETCD", "K8S", "PROVISIONER", "ATTACHER", "RESIZER", "SNAPSHOTTER", "SNAPSHOT_CRD", "HELM"} {
		pins += v.at(p) + "\n"
	}
	sum := sha256.Sum256([]byte(pins))
	return "k8s-" + v.get("K8S_VERSION") + "-" + hex.EncodeToString(sum[:])[:10]
}

// stagingVersion is what the staging modules (k8s.io/api, ...) carry of
// Kubernetes v1.X.Y: v0.X.Y.
func (v versions) stagingVersion() string {
	return "v0." + strings.TrimPrefix(v.get("K8S_VERSION"), "v1.")
}
