package disks

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"carve.dev/carve/driver/nodefs"
	"carve.dev/carve/lvm/runner"
)

// blkid's exit codes (blkid(8)) other than 0, something found.
const (
	blkidNothing    = 2 // nothing found, or no such device (checked first)
	blkidAmbivalent = 8 // -p: several signatures it cannot choose between
)

// Signatures is what blkid's low-level probe finds on a device. Only Type,
// PTType, Usage and Ambivalent decide anything; UUID and Label are for
// messages.
type Signatures struct {
	// Type is the superblock's kind (ext4, xfs, LVM2_member,
	// linux_raid_member, crypto_LUKS, swap, ...); PTType a partition
	// table's (gpt, dos).
	Type, PTType string
	// Usage is blkid's class of Type: filesystem, raid, crypto, other.
	Usage       string
	UUID, Label string
	// Ambivalent: blkid found several signatures and would not say which
	// one the device holds (exit code 8); it holds something.
	Ambivalent bool
}

// Blank tells a device on which blkid found nothing.
func (s Signatures) Blank() bool { return s == Signatures{} }

// Probe asks blkid what dev holds. Why `blkid -p`: without -p blkid
// answers from its cache (/run/blkid/blkid.tab), which tells what a device
// held when it was last probed, not what it holds now; a disk rewritten by
// another host, or swapped, reads as it was. -p reads the device itself,
// superblocks and partition tables both, at the start and at the end (md
// 0.90 and 1.0, GPT's backup), and says when two signatures disagree
// (Ambivalent) instead of picking one. The device must exist as a block
// device: blkid's "nothing found" is also its answer for a missing path,
// which would read as blank.
func Probe(ctx context.Context, run runner.Runner, dev string) (Signatures, error) {
	if err := nodefs.CheckBlockDevice(dev); err != nil {
		return Signatures{}, fmt.Errorf("probe: %w", err)
	}
	return probe(ctx, run, dev)
}

// probe runs blkid on dev, which Probe checked, or a test's file.
func probe(ctx context.Context, run runner.Runner, dev string) (Signatures, error) {
	out, err := run.Run(ctx, "blkid", "-p", "-o", "export", dev)
	var rerr *runner.Error
	switch {
	case errors.As(err, &rerr) && rerr.ExitCode == blkidNothing:
		return Signatures{}, nil
	case errors.As(err, &rerr) && rerr.ExitCode == blkidAmbivalent:
		return Signatures{Ambivalent: true}, nil
	case err != nil:
		return Signatures{}, fmt.Errorf("probe %s: %w", dev, err)
	}
	s, err := ParseBlkid(out)
	if err != nil {
		return Signatures{}, fmt.Errorf("probe %s: %w", dev, err)
	}
	// blkid said it found something (exit 0): what it did not name is
	// still not blank, and no guess is made that it is.
	if s.Blank() {
		return Signatures{}, fmt.Errorf("probe %s: blkid found something but named no type: %q", dev, out)
	}
	return s, nil
}

// ParseBlkid reads `blkid -o export` output: KEY=VALUE lines, the value
// with blkid's backslash before a blank, quote, '$', '`', '<', '>' or
// backslash. Keys other than Signatures' are skipped (DEVNAME, VERSION,
// BLOCK_SIZE, PTUUID, ...); a line that is no KEY=VALUE is an error.
// Non-ASCII and control bytes stay as blkid writes them (M-x, ^x).
func ParseBlkid(out []byte) (Signatures, error) {
	var s Signatures
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok || !validKey(key) {
			return Signatures{}, fmt.Errorf("blkid output line %q is not KEY=VALUE", line)
		}
		if f := s.field(key); f != nil {
			*f = unescape(val)
		}
	}
	if err := sc.Err(); err != nil {
		return Signatures{}, fmt.Errorf("read blkid output: %w", err)
	}
	return s, nil
}

// field is where the value of key goes; nil for a key not kept.
func (s *Signatures) field(key string) *string {
	switch key {
	case "TYPE":
		return &s.Type
	case "PTTYPE":
		return &s.PTType
	case "USAGE":
		return &s.Usage
	case "UUID":
		return &s.UUID
	case "LABEL":
		return &s.Label
	}
	return nil
}

// validKey: blkid's keys are upper-case words (PART_ENTRY_UUID).
func validKey(k string) bool {
	return k != "" && strings.Trim(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == ""
}

// unescape drops the backslash blkid writes before each special
// character.
func unescape(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String()
}
