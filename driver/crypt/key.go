package crypt

import (
	"fmt"

	"carve.dev/carve/driver/volume"
)

// SecretKey is the entry of the node-stage (and node-expand) secret that
// holds a volume's passphrase: the Secret's data key.
const SecretKey = "encryptionKey"

// maxKeyBytes bounds a passphrase: cryptsetup reads at most 8 MiB from a
// key file; a Secret's entry of more than a few KiB is a mistake.
const maxKeyBytes = 4096

// Key is a passphrase. It is passed to cryptsetup on stdin only; every way
// of printing it shows "[redacted]".
type Key struct{ b []byte }

// KeyFrom reads the passphrase from a CSI request's secrets. None, or an
// empty or oversized one, is volume.ErrInvalidArgument: the request lacks
// what an encrypted volume needs (the StorageClass's node-stage or
// node-expand secret). The message names the entry, never its value.
func KeyFrom(secrets map[string]string, what string) (Key, error) {
	v, ok := secrets[SecretKey]
	switch {
	case !ok:
		return Key{}, fmt.Errorf("%w: encrypted volume: the %s secret has no %q entry (see the StorageClass's csi.storage.k8s.io/%s-secret-name)",
			volume.ErrInvalidArgument, what, SecretKey, what)
	case v == "":
		return Key{}, fmt.Errorf("%w: encrypted volume: the %s secret's %q entry is empty", volume.ErrInvalidArgument, what, SecretKey)
	case len(v) > maxKeyBytes:
		return Key{}, fmt.Errorf("%w: encrypted volume: the %s secret's %q entry is longer than %d bytes",
			volume.ErrInvalidArgument, what, SecretKey, maxKeyBytes)
	}
	return Key{b: []byte(v)}, nil
}

func (k Key) bytes() []byte { return k.b }

// String, GoString and Format keep the passphrase out of any output.
func (k Key) String() string                { return "[redacted]" }
func (k Key) GoString() string              { return "crypt.Key{[redacted]}" }
func (k Key) Format(f fmt.State, verb rune) { _, _ = f.Write([]byte("[redacted]")) }
