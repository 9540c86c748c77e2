package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// input is one file the binaries depend on.
type input struct {
	name string
	data []byte
}

// fingerprint is the stamp of a set of binaries: the cache directory's
// key holds the pins already; this adds the recipe (the committed
// modules, this tool's source, versions.sh, goenv.sh's settings, the
// wrapper) and the Go version, so that changing any of them rebuilds
// rather than using binaries made another way. Order-independent; each
// file's name and length are hashed with it, so no two sets collide by
// moving bytes from one file to the next.
func fingerprint(files []input, goVersion string) string {
	sorted := append([]input(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	h := sha256.New()
	for _, f := range sorted {
		h.Write([]byte(f.name + "\x00" + strconv.Itoa(len(f.data)) + "\x00"))
		h.Write(f.data)
	}
	h.Write([]byte("go\x00" + goVersion))
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// recipeFiles reads the fingerprint's files, paths from the repository's
// root: every file of the committed modules, the tool's Go sources
// (tests apart: they change no binary) and the scripts it runs under.
func recipeFiles() ([]input, error) {
	names := []string{"scripts/k8s/build.sh", "scripts/k8s/versions.sh", "scripts/goenv.sh"}
	for _, dir := range []string{modulesDir, "scripts/k8s/build"} {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasSuffix(p, "_test.go") {
				return err
			}
			if dir == modulesDir || strings.HasSuffix(p, ".go") {
				names = append(names, p)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list the recipe's files: %w", err)
		}
	}
	files := make([]input, 0, len(names))
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("read the recipe: %w", err)
		}
		files = append(files, input{name: filepath.ToSlash(n), data: b})
	}
	return files, nil
}
