//go:build vmtest

package crash

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"carve.dev/carve/test/csiflow"
	"carve.dev/carve/test/testenv"
)

// state is what an operation leaves that a crash must not change: every
// LV of the VG (internal ones too: a leaked frozen point or COW shows)
// with its size, layout, activation and tags; the VG's free bytes; the
// mounts in the test's directory. Thin pool usage is left out: it counts
// blocks written, which a retried copy may write twice.
// createdPrefix is the tag of a thin snapshot's creation time.
const createdPrefix = "carve.dev/created="

func (e *env) state() string {
	e.t.Helper()
	ctx := context.Background()
	lvs, err := e.lvm.ListAllLVs(ctx, vg)
	if err != nil {
		e.t.Fatal(err)
	}
	var lines []string
	for _, lv := range lvs {
		tags := slices.Clone(lv.Tags)
		for i, t := range tags {
			// A thin snapshot's creation time is a tag of the second its
			// lvcreate ran, in whichever run: that it is one is the state.
			if v, ok := strings.CutPrefix(t, createdPrefix); ok {
				if _, err := strconv.ParseInt(v, 10, 64); err == nil {
					tags[i] = createdPrefix + "<unix second>"
				}
			}
		}
		sort.Strings(tags)
		lines = append(lines, fmt.Sprintf("lv %s size=%d layout=%s active=%v origin=%s pool=%s tags=%s",
			lv.Name, lv.Size, lv.Layout, lv.Active, lv.Origin, lv.PoolLV, strings.Join(tags, ",")))
	}
	g, err := e.lvm.GetVG(ctx, vg)
	if err != nil {
		e.t.Fatal(err)
	}
	lines = append(lines, fmt.Sprintf("vg free=%d", g.Free))
	for _, m := range testenv.MountsUnder(e.t, e.dir) {
		lines = append(lines, "mount "+strings.TrimPrefix(m.MountPoint, e.dir+"/")+" "+m.FsType)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

var snw = csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER

func mountCap() *csi.VolumeCapability { return csiflow.MountCap(snw, "ext4") }

// createVolume asks for a volume as a CO would, retrying.
func (e *env) createVolume(name string, size int64, params map[string]string, src *csi.VolumeContentSource) error {
	return retry(e.alive, func() error {
		_, err := e.c.Controller.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
			Name: name, CapacityRange: &csi.CapacityRange{RequiredBytes: size}, Parameters: params,
			VolumeCapabilities: []*csi.VolumeCapability{mountCap()}, VolumeContentSource: src,
		})
		return err
	})
}

// volume creates a volume on an un-armed carve and returns its ID.
func (e *env) volume(name string, params map[string]string) string {
	e.t.Helper()
	resp, err := e.c.Controller.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name: name, CapacityRange: &csi.CapacityRange{RequiredBytes: 16 * mib}, Parameters: params,
		VolumeCapabilities: []*csi.VolumeCapability{mountCap()},
	})
	must(e.t, err)
	return resp.GetVolume().GetVolumeId()
}

// handle is a csiflow view of volume id for the lifecycle steps.
func (e *env) handle(id string) *csiflow.Volume {
	return e.c.Wrap(&csi.Volume{VolumeId: id}, mountCap())
}

// write puts 1 MiB of random data in a file of volume id (attach, stage,
// publish, write, sync, then all the way back) and returns its digest.
func (e *env) write(id string) [32]byte {
	e.t.Helper()
	data := make([]byte, mib)
	_, _ = rand.Read(data)
	e.withMounted(id, func(target string) {
		must(e.t, os.WriteFile(filepath.Join(target, "data"), data, 0o644))
		must(e.t, syncFS(target))
	})
	return sha256.Sum256(data)
}

// read returns the digest of the file write left in volume id.
func (e *env) read(id string) [32]byte {
	e.t.Helper()
	var sum [32]byte
	e.withMounted(id, func(target string) {
		b, err := os.ReadFile(filepath.Join(target, "data"))
		must(e.t, err)
		sum = sha256.Sum256(b)
	})
	return sum
}

func (e *env) withMounted(id string, fn func(target string)) {
	e.t.Helper()
	ctx := context.Background()
	v := e.handle(id)
	target := e.path("io-target")
	must(e.t, v.Up(ctx, node, e.path("io-staging"), target))
	fn(target)
	must(e.t, v.Down(ctx, target))
}

func syncFS(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	return unix.Syncfs(int(f.Fd()))
}

// fsUUID is the filesystem UUID blkid finds on the volume's device; ""
// when there is none (or the device is not there).
func fsUUID(lv string) string {
	out, _ := exec.Command("blkid", "-p", "-o", "value", "-s", "UUID", "/dev/"+vg+"/"+lv).Output()
	return strings.TrimSpace(string(out))
}
