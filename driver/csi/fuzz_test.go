package csi

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/nodefs"
	"carve.dev/carve/driver/nodepath"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/test/lvmfake"
)

// FuzzParseParams: any parameter map yields either parameters naming a
// served VG and a supported filesystem, or an INVALID_ARGUMENT error.
func FuzzParseParams(f *testing.F) {
	f.Add("volumeGroup", "vg0", "fsType", "ext4")
	f.Add("volumeGroup", "", "fsType", "")
	f.Add("csi.storage.k8s.io/pvc/name", "x", "fsType", "xfs")
	f.Add("bogus", "1", "fsType", "ntfs")
	f.Add("encryption", "luks2", "fsType", "xfs")
	f.Add("encryption", "LUKS2", "encryption", "none")
	f.Add("volumeGroups", "vg0,vg1", "volumeGroupPolicy", "pack")
	f.Add("volumeGroups", "@fast", "volumeGroupPolicy", "spread")
	f.Add("volumeGroups", "vg0,,vg0", "volumeGroup", "vg1")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		params := map[string]string{k1: v1, k2: v2}
		p, err := parseParams(params, []string{"vg0"})
		if err != nil {
			if !errors.Is(err, volume.ErrInvalidArgument) {
				t.Fatalf("error %v is not INVALID_ARGUMENT", err)
			}
			return
		}
		// One VG is checked against the served ones later (checkVG);
		// several here, names and tag as lvm2 takes them.
		_, one := p.VGs.Single()
		if (!one && p.VGs.Validate() != nil) || (p.FsType != "" && !slices.Contains(volume.FSTypes, p.FsType)) {
			t.Fatalf("accepted %+v", p)
		}
		// Encryption is on exactly when asked by its one spelling.
		if p.Encrypted != (params[ParamEncryption] == EncryptionLUKS2) {
			t.Fatalf("accepted %+v from %v", p, params)
		}
	})
}

// FuzzParseMutable: any mutable parameter map is refused as
// INVALID_ARGUMENT, or holds only a mirrors count lvm2 takes; the merge
// into a StorageClass's parameters then parses as one would by hand.
func FuzzParseMutable(f *testing.F) {
	f.Add("mirrors", "1", "mirrors", "1")
	f.Add("mirrors", "0", "volumeGroup", "vg0")
	f.Add("XXX_FakeKey", "XXX_FakeValue", "", "")
	f.Add("mirrors", "+1", "stripes", "2")
	f.Add("writeBytesPerSecond", "10Mi", "writeBytesPerSecond", "10Mi")
	f.Add("readIOPS", "0", "readIOPS", "0")
	f.Add("readBytesPerSecond", "4611686018427387905", "", "")
	f.Add("writeCache", "1Gi", "writeCachePVs", "@fast,/dev/nvme1n1")
	f.Add("writeCache", "0", "writeCache", "0")
	f.Add("writeCachePVs", "@fast", "", "")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		in := map[string]string{k1: v1, k2: v2}
		m, err := parseMutable(in)
		if err != nil {
			if !errors.Is(err, volume.ErrInvalidArgument) {
				t.Fatalf("error %v is not INVALID_ARGUMENT", err)
			}
			return
		}
		if m.WriteCache != nil {
			checkWriteCache(t, in, m)
			return
		}
		if len(in) != 1 || m.IsZero() {
			t.Fatalf("accepted %v as %+v", in, m)
		}
		if m.ChangesLimits() {
			// A limit: within bounds, and a new volume made with it has it.
			l := m.Limits(volume.IOLimits{})
			if m.Mirrors != nil || max(l.ReadBPS, l.WriteBPS, l.ReadIOPS, l.WriteIOPS) > maxLimit {
				t.Fatalf("accepted %v as %+v", in, l)
			}
			p, err := parseParams(withMutable(map[string]string{ParamWriteBPS: "7"}, m), []string{"vg0"})
			if err != nil || p.Limits != m.Limits(volume.IOLimits{WriteBPS: 7}) {
				t.Fatalf("a volume made with mutable %v: %+v, %v", in, p.Limits, err)
			}
			return
		}
		if m.Mirrors == nil || *m.Mirrors < 0 || *m.Mirrors > maxMirrors {
			t.Fatalf("accepted %v as %+v", in, m)
		}
		p, err := parseParams(withMutable(map[string]string{ParamStripes: "2"}, m), []string{"vg0"})
		if (err == nil) != (*m.Mirrors == 0) || (err == nil && p.Type.Mirrors != 0) {
			t.Fatalf("stripes with mutable %+v: %+v, %v", *m.Mirrors, p, err)
		}
	})
}

// checkWriteCache: an accepted write cache is a size within bounds and,
// for a cache, PVs lvm2 reads as such; a volume made with it asks for it.
func checkWriteCache(t *testing.T, in map[string]string, m volume.Mutable) {
	c := m.WriteCache
	if _, ok := in[ParamWriteCache]; !ok || c.Size > maxLimit || m.Mirrors != nil || m.ChangesLimits() {
		t.Fatalf("accepted %v as %+v", in, c)
	}
	if c.Size == 0 {
		return
	}
	if err := lvm.ValidatePVRefs(c.On); err != nil {
		t.Fatalf("accepted %v with PVs %q: %v", in, c.On, err)
	}
	p, err := parseParams(withMutable(map[string]string{}, m), []string{"vg0"})
	if err != nil || p.WriteCache == nil || p.WriteCache.Size != c.Size || !slices.Equal(p.WriteCache.On, c.On) {
		t.Fatalf("a volume made with mutable %v: %+v, %v", in, p.WriteCache, err)
	}
}

// FuzzSizeRange: any capacity range is refused as INVALID_ARGUMENT only
// when it is negative or upside down; an accepted one gives a positive
// size within the asked range, raised to the filesystem's minimum only
// where the limit leaves room for it.
func FuzzSizeRange(f *testing.F) {
	f.Add(int64(0), int64(0), "")
	f.Add(int64(10<<20), int64(0), "xfs")
	f.Add(int64(10<<20), int64(200<<20), "xfs")
	f.Add(int64(-1), int64(5), "ext4")
	f.Add(int64(7), int64(3), "btrfs")
	f.Add(int64(0), int64(1), "zfs")
	f.Fuzz(func(t *testing.T, req, lim int64, fs string) {
		required, limit, err := sizeRange(&csi.CapacityRange{RequiredBytes: req, LimitBytes: lim}, fs)
		bad := req < 0 || lim < 0 || (lim > 0 && req > lim)
		if err != nil {
			if !bad || !errors.Is(err, volume.ErrInvalidArgument) {
				t.Fatalf("[%d, %d] %q refused: %v", req, lim, fs, err)
			}
			return
		}
		switch {
		case bad:
			t.Fatalf("[%d, %d] accepted as %d, %d", req, lim, required, limit)
		case limit != lim:
			t.Fatalf("[%d, %d]: limit changed to %d", req, lim, limit)
		case required <= 0 || required < req:
			t.Fatalf("[%d, %d] %q: size %d", req, lim, fs, required)
		case limit > 0 && required > limit:
			t.Fatalf("[%d, %d] %q: size %d above the limit", req, lim, fs, required)
		case (limit == 0 || limit >= volume.MinSize(fs)) && required < volume.MinSize(fs):
			t.Fatalf("[%d, %d] %q: size %d under the filesystem's minimum", req, lim, fs, required)
		}
	})
}

// lvState is the fake's LVs of vg0 as text: names, sizes and tags.
func lvState(t *testing.T, f *lvmfake.LVM) string {
	t.Helper()
	lvs, err := f.ListLVs(context.Background(), lvm.Fresh, "vg0")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, lv := range lvs {
		lines = append(lines, fmt.Sprintf("%s %d %v %t\n", lv.Name, lv.Size, lv.Tags, lv.Active))
	}
	slices.Sort(lines)
	return strings.Join(lines, "")
}

// snapshotRig is a controller over a fake VG holding one thin volume,
// the source of the snapshots.
func snapshotRig(t *testing.T) (*Controller, *lvmfake.LVM, string) {
	t.Helper()
	f := lvmfake.New(100*mib, "vg0")
	f.PutThinPool("vg0", "pool", 40*mib, 0)
	m := lvmvol.NewManager(lvmvol.Config{LVM: f, Wiper: f, Node: testNode, VolumeGroups: []string{"vg0"}})
	v, err := m.CreateVolume(context.Background(), volume.CreateRequest{Name: "pvc-src", VG: "vg0", RequiredBytes: 8 * mib,
		Type: volume.Type{ThinPool: "pool"}})
	if err != nil {
		t.Fatal(err)
	}
	return NewController(m), f, v.ID.String()
}

// FuzzCreateSnapshot: VolumeSnapshotClass parameters, snapshot names and
// source IDs. Carve has no snapshot parameters of its own: any parameter
// but the CO's (csi.storage.k8s.io/) is INVALID_ARGUMENT; a source that is
// not the volume is NOT_FOUND (INVALID_ARGUMENT when missing,
// FAILED_PRECONDITION for an LV that is not Carve's, the pool). A
// refusal changes no LV; a snapshot taken is one new LV, named after the
// snapshot name, of that source.
func FuzzCreateSnapshot(f *testing.F) {
	src := testNode + "/vg0/pvc-src"
	f.Add("snap-1", src, "", "")
	f.Add("snap-1", src, volume.COParamPrefix+"volumesnapshot/name", "x")
	f.Add("snap-1", src, "csi.storage.k8s.io/snapshotter-secret-name", "s")
	f.Add("snap-1", src, "type", "thick")
	f.Add("snap-1", src, "CSI.storage.k8s.io/x", "")
	f.Add("", src, "", "")
	f.Add("../../etc", testNode+"/vg0/../pvc-src", "", "")
	f.Add("s", "node-b/vg0/pvc-src", "", "")
	f.Add("s", testNode+"/vg0/pool", "", "")
	f.Add("s;reboot", "", "", "")
	f.Fuzz(func(t *testing.T, name, source, key, value string) {
		c, fake, srcID := snapshotRig(t)
		var params map[string]string
		if key != "" || value != "" {
			params = map[string]string{key: value}
		}
		before := lvState(t, fake)
		resp, err := c.CreateSnapshot(context.Background(), &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: source, Parameters: params})
		after := lvState(t, fake)
		code := volume.CodeOf(err)
		foreignParam := params != nil && !strings.HasPrefix(key, volume.COParamPrefix)
		switch {
		case err != nil && before != after:
			t.Fatalf("refused (%v) but LVM changed:\n%s->\n%s", err, before, after)
		case err != nil && code != codes.InvalidArgument && code != codes.NotFound && code != codes.FailedPrecondition:
			t.Fatalf("%q of %q %v: code %v (%v)", name, source, params, code, err)
		case (foreignParam || name == "" || source == "") && code != codes.InvalidArgument:
			t.Fatalf("%q of %q %v: code %v (%v), want InvalidArgument", name, source, params, code, err)
		case err != nil:
			return
		case source != srcID:
			t.Fatalf("snapshot of %q taken: %v", source, resp)
		}
		id, perr := volume.ParseID(resp.GetSnapshot().GetSnapshotId())
		switch {
		case perr != nil || id.Node != testNode || id.VG != "vg0" || id.LV != volume.SnapshotLVName(name):
			t.Fatalf("%q: snapshot ID %q", name, resp.GetSnapshot().GetSnapshotId())
		case resp.GetSnapshot().GetSourceVolumeId() != srcID:
			t.Fatalf("%q: source %q", name, resp.GetSnapshot().GetSourceVolumeId())
		case strings.Count(after, "\n") != strings.Count(before, "\n")+1:
			t.Fatalf("%q: LVs\n%s->\n%s", name, before, after)
		}
	})
}

// FuzzTopology: the node a CO names in a topology segment. CreateVolume
// carves only on this node (another valid node ID is RESOURCE_EXHAUSTED,
// so that the CO looks elsewhere; what cannot be a node ID is
// INVALID_ARGUMENT) and reports the node back as its topology; GetCapacity
// offers space only here. A refusal changes no LV.
func FuzzTopology(f *testing.F) {
	for _, s := range []string{testNode, "node-b", "", "a/b", "../x", "-x", strings.Repeat("n", 64), "nöde", "x\x00", "$(reboot)"} {
		f.Add(s, true)
	}
	f.Add("other", false)
	f.Fuzz(func(t *testing.T, node string, preferred bool) {
		fake := lvmfake.New(100*mib, "vg0")
		m := lvmvol.NewManager(lvmvol.Config{LVM: fake, Wiper: fake, Node: testNode, VolumeGroups: []string{"vg0"}})
		c := NewController(m)
		topo := []*csi.Topology{{Segments: map[string]string{TopologyKey: node}}}
		reqs := &csi.TopologyRequirement{Requisite: topo}
		if preferred {
			reqs.Preferred = topo
		}
		req := createReq("pvc-1", 8*mib, nil)
		req.AccessibilityRequirements = reqs
		ctx := context.Background()
		before := lvState(t, fake)
		resp, err := c.CreateVolume(ctx, req)
		after := lvState(t, fake)
		valid := volume.ValidateNodeID(node) == nil
		switch code := volume.CodeOf(err); {
		case err != nil && before != after:
			t.Fatalf("%q refused (%v) but LVM changed", node, err)
		case node == "" || node == testNode:
			if err != nil || resp.GetVolume().GetAccessibleTopology()[0].GetSegments()[TopologyKey] != testNode {
				t.Fatalf("%q: %v, %v", node, resp, err)
			}
		case valid && code != codes.ResourceExhausted:
			t.Fatalf("other node %q: code %v (%v), want ResourceExhausted", node, code, err)
		case !valid && code != codes.InvalidArgument:
			t.Fatalf("node %q: code %v (%v), want InvalidArgument", node, code, err)
		}
		capy, err := c.GetCapacity(ctx, &csi.GetCapacityRequest{AccessibleTopology: &csi.Topology{Segments: map[string]string{TopologyKey: node}}})
		switch code := volume.CodeOf(err); {
		case node == "" || node == testNode:
			if err != nil || capy.GetAvailableCapacity() <= 0 {
				t.Fatalf("capacity of %q: %v, %v", node, capy, err)
			}
		case valid && (err != nil || capy.GetAvailableCapacity() != 0):
			t.Fatalf("capacity of other node %q: %v, %v", node, capy, err)
		case !valid && code != codes.InvalidArgument:
			t.Fatalf("capacity of %q: code %v (%v), want InvalidArgument", node, code, err)
		}
	})
}

// FuzzParseType: the volume type parameters (thinPool, stripes,
// stripeSize such as "64Ki", mirrors). An accepted set names at most one
// kind of LV within lvm2's bounds (2-128 stripes, 1-63 mirrors, a stripe
// size that is a power of two of at least 4 KiB and only with stripes, a
// valid pool name), and the type written back as parameters, the stripe
// size in bytes or in KiB, parses to the same type. A refusal is
// INVALID_ARGUMENT.
func FuzzParseType(f *testing.F) {
	f.Add("", "", "", "")
	f.Add("2", "64Ki", "", "")
	f.Add("128", "1Gi", "", "")
	f.Add("2", "4096", "", "")
	f.Add("2", "4095", "", "")
	f.Add("2", "0", "", "")
	f.Add("2", "-64Ki", "", "")
	f.Add("2", "64ki", "", "")
	f.Add("2", "4294967295Gi", "", "")
	f.Add("2", "2147483648Gi", "", "")
	f.Add("2", "16Gi", "", "")
	f.Add("2", "32Gi", "", "")
	f.Add("2", "17179869184", "", "")
	f.Add("2", "18446744073709551615Ki", "", "")
	f.Add("2", "64Ki ", "", "")
	f.Add("1", "", "", "")
	f.Add("129", "", "", "")
	f.Add("", "", "1", "")
	f.Add("", "", "64", "")
	f.Add("+2", "0x1000", "-1", "")
	f.Add("", "", "", "pool")
	f.Add("", "", "", "../pool")
	f.Add("", "", "", "pool_tdata")
	f.Add("2", "", "1", "pool")
	f.Add("99999999999999999999", "", "", "")
	f.Fuzz(func(t *testing.T, stripes, stripeSize, mirrors, pool string) {
		params := map[string]string{}
		for k, v := range map[string]string{ParamStripes: stripes, ParamStripeSize: stripeSize, ParamMirrors: mirrors, ParamThinPool: pool} {
			if v != "" {
				params[k] = v
			}
		}
		ty, err := parseType(params)
		if err != nil {
			if !errors.Is(err, volume.ErrInvalidArgument) {
				t.Fatalf("%v: error %v is not INVALID_ARGUMENT", params, err)
			}
			return
		}
		kinds := 0
		for _, set := range []bool{ty.ThinPool != "", ty.Stripes > 0, ty.Mirrors > 0} {
			if set {
				kinds++
			}
		}
		switch {
		case kinds > 1:
			t.Fatalf("%v: %+v is of %d kinds", params, ty, kinds)
		case ty.Stripes != 0 && (ty.Stripes < 2 || ty.Stripes > 128):
			t.Fatalf("%v: %d stripes", params, ty.Stripes)
		case ty.Mirrors < 0 || ty.Mirrors > 63:
			t.Fatalf("%v: %d mirrors", params, ty.Mirrors)
		case ty.StripeSize != 0 && (ty.Stripes == 0 || ty.StripeSize < 4096 || ty.StripeSize > 16<<30 || ty.StripeSize&(ty.StripeSize-1) != 0):
			t.Fatalf("%v: stripe size %d", params, ty.StripeSize)
		case ty.ThinPool != "" && lvm.ValidateLVName(ty.ThinPool) != nil:
			t.Fatalf("%v: pool %q", params, ty.ThinPool)
		}
		for _, size := range []string{strconv.FormatUint(ty.StripeSize, 10), strconv.FormatUint(ty.StripeSize>>10, 10) + "Ki"} {
			back := map[string]string{}
			if ty.Stripes > 0 {
				back[ParamStripes] = strconv.Itoa(ty.Stripes)
			}
			if ty.StripeSize > 0 {
				back[ParamStripeSize] = size
			}
			if ty.Mirrors > 0 {
				back[ParamMirrors] = strconv.Itoa(ty.Mirrors)
			}
			if ty.ThinPool != "" {
				back[ParamThinPool] = ty.ThinPool
			}
			if again, err := parseType(back); err != nil || again != ty {
				t.Fatalf("%v -> %+v -> %v -> %+v, %v", params, ty, back, again, err)
			}
		}
	})
}

// FuzzCapabilities: two volume capabilities, each with any access mode,
// access type, filesystem and mount flag. An accepted list asks only for
// single-node modes, block or mount, and filesystems Carve makes; the
// filesystem chosen for it is one of those, and two mount capabilities
// asking for different filesystems are refused. ValidateVolumeCapabilities
// confirms exactly the lists CreateVolume takes.
func FuzzCapabilities(f *testing.F) {
	f.Add(int32(1), uint8(1), "ext4", "noatime", int32(1), uint8(2), "", "")
	f.Add(int32(5), uint8(1), "xfs", "", int32(7), uint8(1), "ext4", "")
	f.Add(int32(3), uint8(2), "", "", int32(1), uint8(0), "", "")
	f.Add(int32(1), uint8(1), "ntfs", "rw", int32(-1), uint8(1), "ext4", "")
	f.Add(int32(1), uint8(1), "ext4", "", int32(1), uint8(1), "xfs", "")
	f.Fuzz(func(t *testing.T, mode1 int32, kind1 uint8, fs1, flag1 string, mode2 int32, kind2 uint8, fs2, flag2 string) {
		caps := []*csi.VolumeCapability{capOf(mode1, kind1, fs1, flag1), capOf(mode2, kind2, fs2, flag2)}
		err := checkCapabilities(caps)
		if err != nil && !errors.Is(err, volume.ErrInvalidArgument) {
			t.Fatalf("error %v is not INVALID_ARGUMENT", err)
		}
		fsOK := func(fs string) bool { return fs == "" || slices.Contains(volume.FSTypes, fs) }
		single := func(m int32) bool { return slices.Contains(accessModes, csi.VolumeCapability_AccessMode_Mode(m)) }
		want := single(mode1) && single(mode2) && kind1%3 != 0 && kind2%3 != 0 &&
			(kind1%3 != 1 || fsOK(fs1)) && (kind2%3 != 1 || fsOK(fs2))
		if (err == nil) != want {
			t.Fatalf("%v: %v, want accepted=%t", caps, err, want)
		}
		if err != nil {
			return
		}
		fs, err := chooseFsType(caps, "")
		mfs1, mfs2 := caps[0].GetMount().GetFsType(), caps[1].GetMount().GetFsType()
		switch {
		case mfs1 != "" && mfs2 != "" && mfs1 != mfs2:
			if err == nil {
				t.Fatalf("%v: filesystems %q and %q taken as %q", caps, mfs1, mfs2, fs)
			}
		case err != nil || !slices.Contains(volume.FSTypes, fs):
			t.Fatalf("%v: filesystem %q, %v", caps, fs, err)
		}
	})
}

// capOf builds a capability: kind 0 (mod 3) has no access type, 1 mount,
// 2 block.
func capOf(mode int32, kind uint8, fs, flag string) *csi.VolumeCapability {
	c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_Mode(mode)}}
	switch kind % 3 {
	case 1:
		m := &csi.VolumeCapability_MountVolume{FsType: fs}
		if flag != "" {
			m.MountFlags = []string{flag}
		}
		c.AccessType = &csi.VolumeCapability_Mount{Mount: m}
	case 2:
		c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	}
	return c
}

// FuzzPageToken: ListVolumes and ListSnapshots take back only the tokens
// they hand out ("" or the decimal index of the next entry, no more than
// the entries), anything else is ABORTED; and paging through n entries
// with any page size from the first token on visits each once, in order.
func FuzzPageToken(f *testing.F) {
	for _, s := range []string{"", "0", "3", "10", "11", "-1", "+1", "01", " 1", "1e1", "0x1", "9223372036854775808", "abc"} {
		f.Add(s, uint8(10), int32(3))
	}
	f.Fuzz(func(t *testing.T, token string, entries uint8, maxEntries int32) {
		n := int(entries)
		i, err := pageStart(token, n)
		switch {
		case err != nil && volume.CodeOf(err) != codes.Aborted:
			t.Fatalf("%q: %v is not ABORTED", token, err)
		case err != nil:
		case token == "" && i != 0:
			t.Fatalf("no token: start %d", i)
		case token != "" && (i < 0 || i > n || strconv.Itoa(i) != token):
			t.Fatalf("%q taken as %d of %d entries", token, i, n)
		}
		if maxEntries < 0 {
			return
		}
		var seen []int
		tok := ""
		for pages := 0; ; pages++ {
			if pages > n+1 {
				t.Fatalf("%d entries, pages of %d: no end", n, maxEntries)
			}
			start, err := pageStart(tok, n)
			if err != nil {
				t.Fatalf("own token %q refused: %v", tok, err)
			}
			end := pageEnd(start, int(maxEntries), n)
			for e := start; e < end; e++ {
				seen = append(seen, e)
			}
			if tok = nextToken(end, n); tok == "" {
				break
			}
		}
		if len(seen) != n || (n > 0 && (seen[0] != 0 || seen[n-1] != n-1)) {
			t.Fatalf("%d entries, pages of %d: saw %v", n, maxEntries, seen)
		}
		for k := 1; k < len(seen); k++ {
			if seen[k] != seen[k-1]+1 {
				t.Fatalf("%d entries, pages of %d: saw %v", n, maxEntries, seen)
			}
		}
	})
}

// FuzzPublishPaths: the text checks of NodePublish's staging and target
// paths. Accepted paths are both clean, absolute and strictly inside the
// root, and neither is the other or lies inside it: a bind of a
// filesystem into itself or over its own staging is never asked of mount.
func FuzzPublishPaths(f *testing.F) {
	root := "/var/lib/kubelet"
	for _, p := range [][2]string{
		{root + "/plugins/s", root + "/pods/t"}, {root + "/s", root + "/s"}, {root + "/s", root + "/s/t"}, {root + "/s/t", root + "/s"},
		{root + "/s", root + "/st"}, {"/", root + "/t"}, {root, root + "/t"}, {root + "/s", root + "/../etc"}, {root + "/s/", root + "/s"},
		{root + "/s", root + "/t\n"}, {root + "/ü", root + "/$(x)"},
	} {
		f.Add(p[0], p[1])
	}
	pr, err := nodepath.NewRoot(root)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, staging, target string) {
		err := pr.Check(staging)
		if err == nil {
			err = checkDistinct(staging, target)
		}
		if err == nil {
			err = pr.Check(target)
		}
		if err != nil {
			if volume.CodeOf(err) != codes.InvalidArgument {
				t.Fatalf("%q, %q: %v is not INVALID_ARGUMENT", staging, target, err)
			}
			return
		}
		for _, p := range []string{staging, target} {
			if rel, err := filepath.Rel(root, p); err != nil || rel == "." || climbsOut(rel) || filepath.Clean(p) != p {
				t.Fatalf("%q accepted under %s", p, root)
			}
		}
		for _, pair := range [][2]string{{staging, target}, {target, staging}} {
			if rel, err := filepath.Rel(pair[0], pair[1]); err == nil && !climbsOut(rel) {
				t.Fatalf("%q and %q overlap (%q)", staging, target, rel)
			}
		}
	})
}

// climbsOut reports whether rel, a filepath.Rel result, leaves its base:
// ".." or "../..." does; "..0", a name like any other, does not (the
// fuzzer's CI run found the oracle refusing /var/lib/kubelet/..0).
func climbsOut(rel string) bool {
	return rel == ".." || strings.HasPrefix(rel, "../")
}

// FuzzPublishRequest: NodePublish's request checks. An accepted request has
// a volume ID, both paths, a capability Carve honours and mount flags the
// filesystem takes; a read-only publish (readonly, or a reader-only mode)
// asks for no "rw", the one flag that would widen it. A refusal is
// INVALID_ARGUMENT.
func FuzzPublishRequest(f *testing.F) {
	f.Add(true, int32(1), uint8(1), "ext4", "rw")
	f.Add(false, int32(2), uint8(1), "", "rw\x00noatime")
	f.Add(false, int32(1), uint8(1), "xfs", "ro")
	f.Add(false, int32(1), uint8(2), "", "")
	f.Add(true, int32(1), uint8(1), "ext4", "bind\x00remount")
	f.Add(false, int32(1), uint8(1), "ext4", "suid\x00dev\x00exec")
	f.Fuzz(func(t *testing.T, readOnly bool, mode int32, kind uint8, fs, joined string) {
		var flags []string
		if joined != "" {
			flags = strings.Split(joined, "\x00")
		}
		c := capOf(mode, kind, fs, "")
		if m := c.GetMount(); m != nil {
			m.MountFlags = flags
		}
		req := &csi.NodePublishVolumeRequest{VolumeId: testNode + "/vg0/pvc-a", StagingTargetPath: "/s", TargetPath: "/t",
			VolumeCapability: c, Readonly: readOnly}
		err := checkPublishRequest(req)
		if err != nil {
			if code := volume.CodeOf(err); code != codes.InvalidArgument {
				t.Fatalf("%v: code %v (%v)", req, code, err)
			}
			return
		}
		if checkCapability(c) != nil || nodefs.CheckMountFlags(requestFsType(c.GetMount(), nil), c.GetMount().GetMountFlags()) != nil {
			t.Fatalf("%v accepted", req)
		}
		if (readOnly || readOnlyMode(c)) && slices.Contains(c.GetMount().GetMountFlags(), "rw") {
			t.Fatalf("read-only publish with flags %q accepted", c.GetMount().GetMountFlags())
		}
	})
}

// FuzzMetadataPager: any request offset, max_results and run of backend
// ranges (in order or not, overlapping or not) makes the SnapshotMetadata
// stream either refuse with the spec's code, or send only messages the
// spec allows (at most max_results tuples each, tuples increasing and
// apart across messages, none ending at or before starting_offset, none
// past the capacity, at least one message), whose tuples are exactly the
// backend's ranges cut to start at starting_offset.
func FuzzMetadataPager(f *testing.F) {
	f.Add([]byte{0, 1, 0, 1, 2, 16}, int64(0), int32(0), int64(1<<30))
	f.Add([]byte{0, 1, 0, 1, 2, 16}, int64(4096+100), int32(1), int64(1<<30))
	f.Add([]byte{}, int64(0), int32(0), int64(0))
	f.Add([]byte{}, int64(1<<20), int32(0), int64(1<<20))
	f.Add([]byte{0, 4}, int64(1<<20+1), int32(3), int64(1<<20))
	f.Add([]byte{0, 4, 0xfe, 4}, int64(0), int32(2), int64(1<<30)) // overlapping
	f.Add([]byte{0, 0}, int64(0), int32(1), int64(1<<30))          // empty range
	f.Add([]byte{0, 255}, int64(0), int32(0), int64(4096))         // past the capacity
	f.Add([]byte{0, 1}, int64(-1), int32(-1), int64(1<<30))
	f.Fuzz(func(t *testing.T, runs []byte, from int64, maxResults int32, capacity int64) {
		if capacity < 0 {
			capacity = -(capacity + 1)
		}
		var msgs [][]*csi.BlockMetadata
		p, err := newPager(from, maxResults, func(c int64, b []*csi.BlockMetadata) error {
			if c != capacity {
				t.Fatalf("capacity %d, want %d", c, capacity)
			}
			msgs = append(msgs, b)
			return nil
		})
		switch {
		case from < 0:
			if !errors.Is(err, volume.ErrOffsetOutOfRange) {
				t.Fatalf("from %d: %v, want OUT_OF_RANGE", from, err)
			}
			return
		case maxResults < 0:
			if volume.CodeOf(err) != codes.InvalidArgument {
				t.Fatalf("max_results %d: %v, want INVALID_ARGUMENT", maxResults, err)
			}
			return
		case err != nil:
			t.Fatal(err)
		}
		if err := p.Start(capacity); (from > capacity) != errors.Is(err, volume.ErrOffsetOutOfRange) {
			t.Fatalf("from %d, capacity %d: Start %v", from, capacity, err)
		} else if err != nil {
			return
		}
		// The backend's ranges: a gap (signed: back too) and a length
		// in 4 KiB, each pair.
		var in []volume.Range
		end := int64(0)
		failed := false
		for i := 0; i+1 < len(runs) && !failed; i += 2 {
			r := volume.Range{Offset: max(end+int64(int8(runs[i]))*4096, 0), Length: int64(runs[i+1]) * 4096}
			end = r.End()
			if err := p.Range(r); err != nil {
				failed = true
				break
			}
			in = append(in, r)
		}
		if !failed {
			if err := p.finish(); err != nil {
				t.Fatal(err)
			}
			if len(msgs) == 0 {
				t.Fatal("no message sent")
			}
		}
		limit := maxResults
		if limit == 0 || limit > maxTuplesPerMessage {
			limit = maxTuplesPerMessage
		}
		var out []volume.Range
		last := from
		for _, m := range msgs {
			if len(m) > int(limit) {
				t.Fatalf("a message of %d tuples, max_results %d", len(m), maxResults)
			}
			for _, b := range m {
				r := volume.Range{Offset: b.GetByteOffset(), Length: b.GetSizeBytes()}
				if r.Length <= 0 || r.Offset < last || r.End() <= from || r.End() > capacity {
					t.Fatalf("tuple %+v after %d (from %d, capacity %d)", r, last, from, capacity)
				}
				last = r.End()
				out = append(out, r)
			}
		}
		// Every range taken is sent, cut at from (a failed run sends
		// those before its failure, in whole messages only).
		for i, r := range in {
			if r.Offset < from {
				r = volume.Range{Offset: from, Length: r.End() - from}
			}
			if i < len(out) && out[i] != r {
				t.Fatalf("sent %+v for %+v", out[i], in[i])
			}
		}
		if !failed && len(out) != len(in) {
			t.Fatalf("sent %d tuples of %d ranges", len(out), len(in))
		}
	})
}
