package volume_test

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// FuzzIDRoundTrip: an ID prints to a string that parses back to it exactly
// when its three parts are non-empty and hold no '/'; valid node, VG and
// LV names always do.
func FuzzIDRoundTrip(f *testing.F) {
	f.Add("node-a", "vg0", "pvc-1")
	f.Add("n", "vg/x", "lv")
	f.Add("", "vg0", "lv")
	f.Add("node", "..", "../../etc")
	f.Fuzz(func(t *testing.T, node, vg, lv string) {
		id := volume.ID{Node: node, VG: vg, LV: lv}
		got, err := volume.ParseID(id.String())
		shaped := node != "" && vg != "" && lv != "" && !strings.Contains(node+vg+lv, "/")
		valid := volume.ValidateNodeID(node) == nil && lvm.ValidateVGName(vg) == nil && lvm.ValidateLVName(lv) == nil
		switch {
		case err != nil && !errors.Is(err, volume.ErrInvalidID):
			t.Fatalf("%+v: error %v is not ErrInvalidID", id, err)
		case shaped && (err != nil || got != id):
			t.Fatalf("%+v printed as %q parses to %+v, %v", id, id.String(), got, err)
		case !shaped && err == nil && got == id:
			t.Fatalf("%+v: a part is empty or holds '/', yet %q parsed back to it", id, id.String())
		case valid && !shaped:
			t.Fatalf("%+v: valid names that do not make an ID", id)
		}
	})
}

// FuzzValidateNodeID: a node ID is accepted exactly when it is a
// non-empty Kubernetes label value (CSI's rule for topology segment
// values is the same); a refusal is ErrInvalidArgument.
func FuzzValidateNodeID(f *testing.F) {
	for _, s := range []string{"node-a", "ip-10-0-0-1.ec2.internal", "n", "", "a/b", "../x", "-x", "x.", "a b", "(none)", "Node_1",
		strings.Repeat("n", 63), strings.Repeat("n", 64), "nöde", "x\x00y", "a;rm -rf /"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := volume.ValidateNodeID(s)
		label := s != "" && len(validation.IsValidLabelValue(s)) == 0
		switch {
		case err != nil && !errors.Is(err, volume.ErrInvalidArgument):
			t.Fatalf("%q: error %v is not ErrInvalidArgument", s, err)
		case (err == nil) != label:
			t.Fatalf("%q: ValidateNodeID says %v, label value check says %t", s, err, label)
		case err == nil && strings.ContainsAny(s, "/ \x00"):
			t.Fatalf("%q accepted", s)
		}
	})
}

// FuzzLVName: every CSI name gets an LV name that lvm2 and Kubernetes
// (as an object name) accept, short enough for any VG name of up to 56
// characters, the same on every call; two names never share one, and no
// volume's LV name is a snapshot's. A name that is already a safe LV name
// is kept, so that `lvs` shows it. A group snapshot's name is an object
// name too, read back to its key, and never a snapshot's (its members').
func FuzzLVName(f *testing.F) {
	for _, s := range []string{"pvc-0b6a0e5c-3d5f-4b1e-9a3e-1f2d3c4b5a69", "sanity Node Service 1", "csi-abc", "snap-x", "snapshot1",
		"pvmove", "a_tmeta", "", ".", "..", "../../etc/passwd", "x\x00", "Ünïcode", "$(reboot)", strings.Repeat("x", 300)} {
		f.Add(s, "pvc-1")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		la, sa, ga := volume.LVName(a), volume.SnapshotLVName(a), volume.GroupSnapshotName(a)
		if key, ok := volume.GroupKeyOf(ga); !ok || key != volume.GroupKey(a) || ga == sa {
			t.Fatalf("%q: group name %q reads back as %q, %v", a, ga, key, ok)
		}
		if _, ok := volume.GroupKeyOf(sa); ok {
			t.Fatalf("%q: snapshot name %q reads as a group's", a, sa)
		}
		for _, n := range []string{la, sa, ga} {
			if err := lvm.ValidateLVName(n); err != nil {
				t.Fatalf("%q: LV name %q: %v", a, n, err)
			}
			if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
				t.Fatalf("%q: LV name %q is no object name: %v", a, n, errs)
			}
			if len(n) > 68 {
				t.Fatalf("%q: LV name %q of %d characters", a, n, len(n))
			}
		}
		if volume.LVName(a) != la || volume.SnapshotLVName(a) != sa {
			t.Fatalf("%q: LV names not deterministic", a)
		}
		if strings.HasPrefix(la, "csi-") != (la != a) {
			t.Fatalf("%q: LV name %q", a, la)
		}
		lb, sb := volume.LVName(b), volume.SnapshotLVName(b)
		if a != b && (la == lb || sa == sb || ga == volume.GroupSnapshotName(b)) {
			t.Fatalf("%q and %q share LV name %q / %q", a, b, la, sa)
		}
		if la == sb || lb == sa {
			t.Fatalf("%q and %q: a volume's and a snapshot's LV names meet", a, b)
		}
	})
}
