// Package crypt is Carve's encryption at rest: LUKS2 on a volume's LV,
// opened as a dm-crypt mapping that carries the filesystem.
//
// Every cryptsetup run goes through the one runner (lvm/runner) with its
// context and timeout, and the key reaches cryptsetup only on its stdin
// (--key-file=-): never as an argument (the process table, the runner's
// logs and errors show those), in the environment or in a file. Key is a
// type of its own whose every formatting says "[redacted]", so a key put
// into a log line or an error by mistake shows nothing.
//
// A mapping's name is Carve's own, derived from the volume (MappingName),
// and before Carve uses or closes a mapping of that name it checks that it
// is a LUKS2 mapping over that very LV (Lookup, Mapping.Over): a mapping
// someone else made under the name is refused, never used or closed.
package crypt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm/runner"
)

// Runner runs cryptsetup: runner.Exec, or a fake in unit tests.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
	RunInput(ctx context.Context, input []byte, name string, args ...string) ([]byte, error)
}

// cryptsetup's exit codes (cryptsetup(8), RETURN CODES).
const (
	exitWrongKey  = 2 // "No key available with this passphrase"
	exitNotActive = 4 // wrong device: for close, no such mapping
	exitBusy      = 5 // device busy or already exists
)

// PBKDF is how a passphrase is stretched into the key that unlocks the
// volume key. Argon2id with a fixed cost, not cryptsetup's benchmark: its
// default targets 2 s of the node's CPU and up to 1 GiB of memory at
// every open, which on a small or busy node (a software-emulated VM took
// 11 s to format and 3.3 s to open) is slow and could be killed for
// memory; and a fixed cost makes an open take the same on every node.
type PBKDF struct {
	// MemoryKiB is argon2id's memory cost in KiB (cryptsetup's minimum is
	// 32 MiB).
	MemoryKiB int
	// Iterations is argon2id's time cost (at least 4).
	Iterations int
}

// DefaultPBKDF: 64 MiB and 4 passes, one thread. See docs in README.md
// (Encryption at rest) for what it costs.
var DefaultPBKDF = PBKDF{MemoryKiB: 64 << 10, Iterations: 4}

// Validate checks the cost against cryptsetup's own bounds, so that a bad
// flag fails at start, not at the first format.
func (p PBKDF) Validate() error {
	if p.MemoryKiB < 32<<10 || p.MemoryKiB > 4<<20 {
		return fmt.Errorf("pbkdf memory %d KiB: want 32768 to 4194304", p.MemoryKiB)
	}
	if p.Iterations < 4 || p.Iterations > 1<<20 {
		return fmt.Errorf("pbkdf iterations %d: want 4 to 1048576", p.Iterations)
	}
	return nil
}

// Cryptsetup drives cryptsetup for LUKS2 volumes.
type Cryptsetup struct {
	run   Runner
	pbkdf PBKDF
}

// New returns a Cryptsetup that formats with pbkdf.
func New(run Runner, pbkdf PBKDF) *Cryptsetup { return &Cryptsetup{run: run, pbkdf: pbkdf} }

// Format writes a LUKS2 header to device, with one keyslot for key. The
// caller has checked that the device holds nothing (never formats over
// data): luksFormat makes anything there unreadable.
func (c *Cryptsetup) Format(ctx context.Context, device string, key Key) error {
	_, err := c.run.RunInput(ctx, key.bytes(), "cryptsetup", "luksFormat", "--batch-mode", "--type", "luks2",
		"--pbkdf", "argon2id", "--pbkdf-memory", strconv.Itoa(c.pbkdf.MemoryKiB),
		"--pbkdf-force-iterations", strconv.Itoa(c.pbkdf.Iterations), "--pbkdf-parallel", "1",
		"--key-file=-", device)
	if err != nil {
		return fmt.Errorf("format %s as LUKS2: %w", device, err)
	}
	return nil
}

// Open maps LUKS2 device at /dev/mapper/name with key. A key no keyslot
// takes is volume.ErrWrongKey, and nothing is changed.
func (c *Cryptsetup) Open(ctx context.Context, device, name string, key Key) error {
	_, err := c.run.RunInput(ctx, key.bytes(), "cryptsetup", "open", "--type", "luks2", "--key-file=-", device, name)
	if exitCode(err) == exitWrongKey {
		return fmt.Errorf("open %s: %w", device, volume.ErrWrongKey)
	}
	if err != nil {
		return fmt.Errorf("open %s as %s: %w", device, name, err)
	}
	return nil
}

// Close removes mapping name; one that is not there is closed already. A
// mapping still in use (mounted) is volume.ErrInUse.
func (c *Cryptsetup) Close(ctx context.Context, name string) error {
	_, err := c.run.Run(ctx, "cryptsetup", "close", name)
	switch exitCode(err) {
	case 0:
		return nil
	case exitNotActive:
		return nil
	case exitBusy:
		return fmt.Errorf("close %s: %w: %w", name, volume.ErrInUse, err)
	}
	return fmt.Errorf("close %s: %w", name, err)
}

// Resize grows mapping name to fill its device, which has grown. LUKS2
// keeps the volume key in the kernel keyring, not in the mapping's table,
// so cryptsetup needs a passphrase to reload the table: key (the
// node-expand secret's).
func (c *Cryptsetup) Resize(ctx context.Context, name string, key Key) error {
	_, err := c.run.RunInput(ctx, key.bytes(), "cryptsetup", "resize", "--key-file=-", name)
	if exitCode(err) == exitWrongKey {
		return fmt.Errorf("resize %s: %w", name, volume.ErrWrongKey)
	}
	if err != nil {
		return fmt.Errorf("resize %s: %w", name, err)
	}
	return nil
}

// Keyslots counts the keyslots in device's LUKS2 header.
//
// Why: luksFormat writes the header first and adds the keyslot after it, so
// a format cut between the two (a crash, a kill) leaves a header that no key
// opens. Such a device holds nothing anyone can read (its volume key was
// never stored), and it was never opened, so no filesystem was ever made on
// it: NodeStage formats it again rather than refusing it for ever as "wrong
// key".
func (c *Cryptsetup) Keyslots(ctx context.Context, device string) (int, error) {
	out, err := c.run.Run(ctx, "cryptsetup", "luksDump", "--dump-json-metadata", device)
	if err != nil {
		return 0, fmt.Errorf("read the LUKS2 header of %s: %w", device, err)
	}
	var hdr struct {
		Keyslots map[string]json.RawMessage `json:"keyslots"`
	}
	if err := json.Unmarshal(out, &hdr); err != nil {
		return 0, fmt.Errorf("read the LUKS2 header of %s: %w", device, err)
	}
	return len(hdr.Keyslots), nil
}

// exitCode is a failed command's exit status: 0 for no error, -1 for one
// that is no exited command.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var rerr *runner.Error
	if errors.As(err, &rerr) {
		return rerr.ExitCode
	}
	return -1
}
