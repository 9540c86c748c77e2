package soakmodel

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
)

// Sum is what a file must read back as: its SHA-256 (hex) and, where the
// driver learns it, its size (0: not known; the cluster's writers log
// digests only).
type Sum struct {
	SHA256 string
	Size   int64
}

// SumOf is b's Sum.
func SumOf(b []byte) Sum {
	d := sha256.Sum256(b)
	return Sum{hex.EncodeToString(d[:]), int64(len(b))}
}

func (s Sum) String() string {
	if s.Size > 0 {
		return fmt.Sprintf("%d bytes of SHA-256 %.16s", s.Size, s.SHA256)
	}
	return "SHA-256 " + s.SHA256
}

// Writes are a volume's acknowledged writes: file name -> what it must
// read back as, for ever after, on the volume and in restores of
// snapshots asked for after it.
type Writes map[string]Sum

func (w Writes) Clone() Writes {
	if w == nil {
		return Writes{}
	}
	return maps.Clone(w)
}

// Count is the number of acknowledged writes.
func (w Writes) Count() int { return len(w) }

// Bytes is what the acknowledged files hold, as far as their sizes are
// known.
func (w Writes) Bytes() int64 {
	var n int64
	for _, s := range w {
		n += s.Size
	}
	return n
}

// Names are the acknowledged files, sorted.
func (w Writes) Names() []string { return slices.Sorted(maps.Keys(w)) }

// Learn records the acknowledgement of a write the driver learnt of by
// reading it (a writer's log), unless it is known already: an
// acknowledged write never changes, and a read that says otherwise is
// what Check reports. It tells whether the write was new.
func (w Writes) Learn(name string, s Sum) bool {
	if _, ok := w[name]; ok {
		return false
	}
	w[name] = s
	return true
}

// Check compares a read of the volume (name -> what it read, in the
// view what: "file", a writer's "log line of") with the acknowledged
// writes: each must be there, the same. With exact, the read may hold
// nothing else (a restore holds exactly its snapshot's files). It
// returns the writes checked and the problems found (none: the volume is
// as it must be).
func (w Writes) Check(what string, read map[string]Sum, exact bool) (checked int, problems []string) {
	for _, name := range w.Names() {
		got, ok := read[name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s %s of an acknowledged write is gone", what, name))
		case got != w[name]:
			problems = append(problems, fmt.Sprintf("%s %s reads back as %s, it was acknowledged as %s", what, name, got, w[name]))
		}
		checked++
	}
	if exact {
		for _, name := range slices.Sorted(maps.Keys(read)) {
			if _, ok := w[name]; !ok {
				problems = append(problems, fmt.Sprintf("%s %s is no acknowledged write", what, name))
			}
		}
	}
	return checked, problems
}
