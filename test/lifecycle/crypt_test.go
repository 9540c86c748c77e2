//go:build vmtest

package lifecycle

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"carve.dev/carve/test/csiflow"
	"carve.dev/carve/test/testenv"
)

// The passphrase of TestEncryptedVolume, and one that is not it: neither
// may appear in carve's log or metrics.
const (
	encKey   = "carve-vm-test-passphrase-6d2e"
	wrongKey = "carve-vm-test-wrong-passphrase-91ab"
)

// pattern is what the test writes through the filesystem and then looks
// for, in vain, on the raw LV.
var pattern = bytes.Repeat([]byte("CARVE-PLAINTEXT-PATTERN-0123456789/"), 1<<15)

// TestEncryptedVolume: an encrypted volume (encryption=luks2) through its
// life on real dm-crypt. Staging without the secret is INVALID_ARGUMENT
// and formats nothing; the first stage formats LUKS2 and opens it; what a
// pod writes is not on the raw LV; unstage closes the mapping (twice is
// fine); a wrong key is PERMISSION_DENIED and changes no byte of the LV;
// expansion grows the mapping (with the node-expand secret) and the
// filesystem; a snapshot restored into a class without encryption is
// encrypted, needs the same key and holds the data; a LUKS2 header of
// another passphrase is refused and one without a keyslot formatted again
// (foreignHeaders); after the deletes no LUKS header is left on the disk;
// and neither key is in carve's log or metrics.
func TestEncryptedVolume(t *testing.T) {
	disks := []string{testenv.Disk(t, "CARVE_TEST_DISK")}
	l := testenv.PrivateLVM(t)
	testenv.NewVG(t, l, vg, disks...)
	metricsAddr := testenv.FreeLoopbackAddr(t)
	// argon2id at its least memory: each open and format costs about 1 s
	// less in the VM than at the default 64 MiB (README.md gives both
	// costs; the e2e runs the default).
	proc := testenv.StartCarve(t, testenv.Options{}, "--volume-groups="+vg, "--node-id="+node, "--health-address="+metricsAddr,
		"--luks-pbkdf-memory=32768")
	e := &env{t: t, lvm: l, c: dial(t, proc.Endpoint), dir: t.TempDir(), disks: disks}
	ctx := context.Background()
	good := map[string]string{"encryptionKey": encKey}

	vol, err := e.c.Create(ctx, "pvc-enc", 64*mib, map[string]string{"encryption": "luks2"}, csiflow.MountCap(snw, "ext4"))
	must(t, err)
	if vol.Context["encryption"] != "luks2" {
		t.Fatalf("volume context %v: want encryption=luks2", vol.Context)
	}
	if lv, _ := e.lv(vol); !lv.HasTag("carve.dev/encrypted") {
		t.Fatalf("LV tags %v: want carve.dev/encrypted", lv.Tags)
	}
	must(t, vol.Attach(ctx, node))
	lvDev := "/dev/" + vg + "/" + filepath.Base(vol.ID)
	staging, target := e.path("staging"), e.path("target")
	e.cleanUpMounts()

	wantCode(t, "stage without the secret", stageWith(ctx, vol, staging, nil), codes.InvalidArgument)
	if got := blkid(t, lvDev); got != "" {
		t.Fatalf("after a refused stage the LV holds %q: want it blank", got)
	}
	start := time.Now()
	must(t, stageWith(ctx, vol, staging, good))
	t.Logf("first stage (luksFormat, open, mkfs.ext4, mount): %v", time.Since(start))
	if got := blkid(t, lvDev); got != "crypto_LUKS" {
		t.Fatalf("LV holds %q after the stage: want crypto_LUKS", got)
	}
	must(t, vol.Publish(ctx, target, false))
	writeSynced(t, filepath.Join(target, "data"), pattern)
	must(t, vol.Unpublish(ctx, target))
	must(t, vol.Unstage(ctx))
	must(t, vol.Unstage(ctx)) // idempotent
	mapping := "/dev/mapper/" + vg + "-" + strings.ReplaceAll(filepath.Base(vol.ID), "-", "--") + "-crypt"
	if _, err := os.Stat(mapping); !os.IsNotExist(err) {
		t.Fatalf("after unstage %s: %v, want it closed", mapping, err)
	}
	if deviceHolds(t, lvDev, 0, pattern[:64]) {
		t.Fatal("the raw LV holds the plaintext written through the filesystem")
	}

	before := deviceSum(t, lvDev)
	start = time.Now()
	err = stageWith(ctx, vol, staging, map[string]string{"encryptionKey": wrongKey})
	wantCode(t, "stage with a wrong key", err, codes.PermissionDenied)
	noKeyIn(t, "the wrong key's error", err.Error())
	t.Logf("refused open with a wrong key: %v", time.Since(start))
	if after := deviceSum(t, lvDev); !bytes.Equal(after, before) {
		t.Fatal("a stage with a wrong key changed the LV")
	}
	if _, err := os.Stat(mapping); !os.IsNotExist(err) {
		t.Fatalf("after a wrong key %s: %v, want no mapping", mapping, err)
	}

	start = time.Now()
	must(t, stageWith(ctx, vol, staging, good))
	t.Logf("restage (open, mount): %v", time.Since(start))
	must(t, vol.Publish(ctx, target, false))
	if got := readPrefix(t, filepath.Join(target, "data"), len(pattern)); !bytes.Equal(got, pattern) {
		t.Fatal("the data did not survive unstage and restage")
	}
	e.expandEncrypted(vol, target, good)

	snap := e.snapshot("snap-enc", vol.ID)
	must(t, vol.Down(ctx, target))
	restored := e.createFrom("pvc-enc-restored", 128*mib, map[string]string{}, &csi.VolumeContentSource{
		Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap.GetSnapshotId()}}})
	if restored.Context["encryption"] != "luks2" {
		t.Fatalf("restore of an encrypted snapshot into a plain class: context %v, want encryption=luks2", restored.Context)
	}
	must(t, restored.Attach(ctx, node))
	rs, rt := e.path("restored-staging"), e.path("restored")
	wantCode(t, "stage of the restore without the secret", stageWith(ctx, restored, rs, nil), codes.InvalidArgument)
	must(t, stageWith(ctx, restored, rs, good))
	must(t, restored.Publish(ctx, rt, false))
	if got := readPrefix(t, filepath.Join(rt, "data"), len(pattern)); !bytes.Equal(got, pattern) {
		t.Fatal("the restored volume does not hold the snapshot's data")
	}
	must(t, restored.Down(ctx, rt))
	e.foreignHeaders(good)

	must(t, restored.Delete(ctx))
	must(t, vol.Delete(ctx))
	_, err = e.c.Controller.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snap.GetSnapshotId()})
	must(t, err)
	if deviceHolds(t, disks[0], 512*mib, []byte("LUKS\xba\xbe"), []byte("SKUL\xba\xbe")) {
		t.Fatal("a LUKS header is left on the disk after every volume was deleted: not wiped")
	}
	noKeyIn(t, "carve's log", readFile(t, proc.Log()))
	noKeyIn(t, "carve's metrics", httpGet(t, "http://"+metricsAddr+"/metrics"))
}

// foreignHeaders: an encrypted volume whose LV holds a LUKS2 header made
// with another passphrase is refused (PERMISSION_DENIED), never formatted;
// one whose header has no keyslot left (what a luksFormat cut between its
// header and its keyslot leaves: no key opens it, nothing on it is
// readable) is formatted again and staged.
func (e *env) foreignHeaders(secrets map[string]string) {
	t, ctx := e.t, context.Background()
	vol, err := e.c.Create(ctx, "pvc-enc-foreign", 32*mib, map[string]string{"encryption": "luks2"}, csiflow.MountCap(snw, "ext4"))
	must(t, err)
	must(t, vol.Attach(ctx, node))
	lvDev := "/dev/" + vg + "/" + filepath.Base(vol.ID)
	format := exec.Command("cryptsetup", "luksFormat", "--batch-mode", "--type", "luks2", "--pbkdf", "pbkdf2",
		"--pbkdf-force-iterations", "1000", "--key-file=-", lvDev)
	format.Stdin = strings.NewReader("someone else's passphrase")
	if out, err := format.CombinedOutput(); err != nil {
		t.Fatalf("luksFormat by hand: %v: %s", err, out)
	}
	uuid := func() string {
		out, _ := exec.Command("blkid", "-p", "-o", "value", "-s", "UUID", lvDev).Output()
		return strings.TrimSpace(string(out))
	}
	foreign := uuid()
	staging := e.path("foreign-staging")
	wantCode(t, "stage over another passphrase's header", stageWith(ctx, vol, staging, secrets), codes.PermissionDenied)
	if got := uuid(); got != foreign {
		t.Fatalf("the foreign header was replaced: UUID %s, was %s", got, foreign)
	}
	if out, err := exec.Command("cryptsetup", "luksErase", "--batch-mode", lvDev).CombinedOutput(); err != nil {
		t.Fatalf("luksErase: %v: %s", err, out)
	}
	must(t, stageWith(ctx, vol, staging, secrets))
	if got := uuid(); got == foreign || got == "" {
		t.Fatalf("a header without a keyslot was not formatted again: UUID %q", got)
	}
	must(t, vol.Unstage(ctx))
	must(t, vol.Detach(ctx))
	must(t, vol.Delete(ctx))
}

// cleanUpMounts, after a failure, unmounts what the test mounted and
// closes the mappings (the layers too), so that the VG can be removed for
// the next test.
func (e *env) cleanUpMounts() {
	e.t.Cleanup(func() {
		if !e.t.Failed() {
			return
		}
		for _, p := range []string{"target", "staging", "restored", "restored-staging", "foreign-staging"} {
			_ = exec.Command("umount", e.path(p)).Run()
		}
		_ = testenv.CloseMappings(vg) // best effort: the test has failed already
	})
}

// expandEncrypted grows the published volume from 64 to 128 MiB: the node
// needs the node-expand secret to grow the mapping, then the filesystem.
func (e *env) expandEncrypted(vol *csiflow.Volume, target string, secrets map[string]string) {
	t, ctx := e.t, context.Background()
	_, err := e.c.Controller.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{
		VolumeId: vol.ID, CapacityRange: &csi.CapacityRange{RequiredBytes: 128 * mib}, VolumeCapability: vol.Cap})
	must(t, err)
	req := &csi.NodeExpandVolumeRequest{VolumeId: vol.ID, VolumePath: target, StagingTargetPath: vol.Staging,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 128 * mib}, VolumeCapability: vol.Cap}
	_, err = e.c.Node.NodeExpandVolume(ctx, req)
	wantCode(t, "node expansion without the secret", err, codes.InvalidArgument)
	req.Secrets = secrets
	start := time.Now()
	_, err = e.c.Node.NodeExpandVolume(ctx, req)
	must(t, err)
	t.Logf("node expansion (cryptsetup resize, resize2fs): %v", time.Since(start))
	// 128 MiB less the 16 MiB LUKS2 header and ext4's own metadata.
	if total := e.fsTotal(vol, target); total < 96*mib {
		t.Fatalf("filesystem is %d bytes after the expansion to 128 MiB", total)
	}
}

// stageWith is NodeStageVolume with secrets.
func stageWith(ctx context.Context, v *csiflow.Volume, staging string, secrets map[string]string) error {
	v.StageSecrets = secrets
	return v.Stage(ctx, staging)
}

// blkid is what blkid finds on device: a type, or "" when blank.
func blkid(t *testing.T, device string) string {
	t.Helper()
	out, err := exec.Command("blkid", "-p", "-o", "value", "-s", "TYPE", device).Output()
	if err != nil && len(out) == 0 {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// openDevice opens a block device to read what the disk holds, past the
// page cache's copy of it (blockdev --flushbufs). The caller closes it: an
// open LV cannot be deactivated.
func openDevice(t *testing.T, device string) *os.File {
	t.Helper()
	if out, err := exec.Command("blockdev", "--flushbufs", device).CombinedOutput(); err != nil {
		t.Fatalf("blockdev --flushbufs %s: %v: %s", device, err, out)
	}
	f, err := os.Open(device)
	must(t, err)
	return f
}

// deviceHolds tells whether the first limit bytes of device (all of it
// when 0) hold any of needles. It reads in chunks: the VM's memory is
// smaller than its disks.
func deviceHolds(t *testing.T, device string, limit int64, needles ...[]byte) bool {
	t.Helper()
	f := openDevice(t, device)
	defer func() { _ = f.Close() }()
	var r io.Reader = f
	if limit > 0 {
		r = io.LimitReader(r, limit)
	}
	const chunk, overlap = 4 * mib, 4096 // every needle is shorter than overlap
	buf := make([]byte, overlap+chunk)
	kept := 0
	for {
		n, err := io.ReadFull(r, buf[kept:])
		for _, nd := range needles {
			if bytes.Contains(buf[:kept+n], nd) {
				return true
			}
		}
		if err != nil {
			return false
		}
		kept = copy(buf, buf[kept+n-overlap:kept+n])
	}
}

// deviceSum is the SHA-256 of all of device.
func deviceSum(t *testing.T, device string) []byte {
	t.Helper()
	h := sha256.New()
	f := openDevice(t, device)
	defer func() { _ = f.Close() }()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return h.Sum(nil)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	return string(b)
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url) //nolint:gosec,noctx // the test's own carve on loopback
	must(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return string(b)
}

// noKeyIn fails when text holds either passphrase of the test.
func noKeyIn(t *testing.T, what, text string) {
	t.Helper()
	if text == "" {
		t.Fatalf("%s is empty: nothing was checked", what)
	}
	for _, k := range []string{encKey, wrongKey} {
		if strings.Contains(text, k) {
			t.Errorf("%s holds a passphrase", what)
		}
	}
}
