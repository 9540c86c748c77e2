package csi

import (
	"errors"
	"testing"

	"carve.dev/carve/driver/crypt"
	"carve.dev/carve/driver/volume"
)

// checkEncryption: an encrypted volume is staged as a filesystem only, on a
// node that can open it; a context that says encrypted for a plain LV is
// refused, never formatted in plaintext.
func TestCheckEncryption(t *testing.T) {
	enc := volumeDevice{Volume: volume.Volume{ID: volume.ID{Node: "n", VG: "vg0", LV: "pvc-1"}, Encrypted: true}}
	plain := volumeDevice{Volume: volume.Volume{ID: enc.ID}}
	luks := map[string]string{ParamEncryption: EncryptionLUKS2}
	able := &Node{crypt: crypt.New(nil, crypt.DefaultPBKDF)}
	for _, tc := range []struct {
		name  string
		n     *Node
		dev   volumeDevice
		vc    map[string]string
		block bool
		want  error
	}{
		{"plain", able, plain, nil, false, nil},
		{"plain block", able, plain, nil, true, nil},
		{"encrypted", able, enc, luks, false, nil},
		{"encrypted, context silent", able, enc, nil, false, nil},
		{"encrypted block", able, enc, luks, true, volume.ErrFailedPrecondition},
		{"context says encrypted, LV does not", able, plain, luks, false, volume.ErrFailedPrecondition},
		{"node without cryptsetup", &Node{}, enc, luks, false, volume.ErrFailedPrecondition},
	} {
		if err := tc.n.checkEncryption(tc.dev, tc.vc, tc.block); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}
