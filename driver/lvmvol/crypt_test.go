package lvmvol_test

import (
	"errors"
	"testing"

	"carve.dev/carve/driver/volume"
)

// An encrypted volume's LV carries the tag; so do its snapshots, and the
// volumes restored or cloned from either, whatever their own request says:
// their bytes are the source's LUKS2 header and ciphertext. Encryption
// asked of a plain source is refused, and no LV is made.
func TestEncryptionFollowsTheData(t *testing.T) {
	m, f := newManager(t)
	f.PutThinPool(vg, "pool", 60*mib, 0)
	enc := thinReq("pvc-enc", 8*mib)
	enc.Encrypted = true
	vol, err := m.CreateVolume(ctx, enc)
	if err != nil || !vol.Encrypted {
		t.Fatalf("create encrypted = %+v, %v", vol, err)
	}
	snap, err := m.CreateSnapshot(ctx, "snapshot-enc", vol.ID)
	if err != nil {
		t.Fatal(err)
	}
	if lv, _ := f.LV(vg, snap.ID.LV); !lv.HasTag("carve.dev/encrypted") {
		t.Errorf("snapshot tags %v: want carve.dev/encrypted", lv.Tags)
	}
	for kind, src := range map[string]volume.ID{volume.SourceSnapshot: snap.ID, volume.SourceVolume: vol.ID} {
		r := thinReq("pvc-from-"+kind, 8*mib) // a class without encryption
		r.Source = &volume.ContentSource{Kind: kind, ID: src}
		got, err := m.CreateVolume(ctx, r)
		if err != nil || !got.Encrypted {
			t.Errorf("%s of an encrypted source = %+v, %v; want encrypted", kind, got, err)
		}
		if again, err := m.CreateVolume(ctx, r); err != nil || again.ID != got.ID || !again.Encrypted {
			t.Errorf("retried %s = %+v, %v", kind, again, err)
		}
	}
	plain, err := m.CreateVolume(ctx, thinReq("pvc-plain", 8*mib))
	if err != nil || plain.Encrypted {
		t.Fatalf("plain = %+v, %v", plain, err)
	}
	r := thinReq("pvc-plain-clone", 8*mib)
	r.Encrypted = true
	r.Source = &volume.ContentSource{Kind: volume.SourceVolume, ID: plain.ID}
	if _, err := m.CreateVolume(ctx, r); !errors.Is(err, volume.ErrSourceMismatch) {
		t.Errorf("encrypted clone of a plain volume: %v, want ErrSourceMismatch", err)
	}
	if _, ok := f.LV(vg, "pvc-plain-clone"); ok {
		t.Error("the refused clone left an LV")
	}
}

// An encrypted volume takes and drops raid1 legs like any thick one (its
// dm-crypt mapping sits above the LV, which lvconvert changes in place),
// and keeps its tag: the conversion's tag changes touch only the legs'.
func TestModifyKeepsEncryption(t *testing.T) {
	m, f := newManager(t)
	f.SetPVCount(vg, 2)
	r := req("pvc-enc", 40*mib)
	r.Encrypted = true
	v, err := m.CreateVolume(ctx, r)
	if err != nil || !v.Encrypted {
		t.Fatalf("create encrypted = %+v, %v", v, err)
	}
	for _, n := range []int{1, 0} {
		got, err := m.ModifyVolume(ctx, v.ID, mirrors(n))
		if err != nil || !got.Encrypted {
			t.Errorf("modify to %d mirrors = %+v, %v; want encrypted", n, got, err)
		}
		if lv, _ := f.LV(vg, "pvc-enc"); !lv.HasTag("carve.dev/encrypted") {
			t.Errorf("after modify to %d mirrors, tags %v: want carve.dev/encrypted", n, lv.Tags)
		}
	}
}
