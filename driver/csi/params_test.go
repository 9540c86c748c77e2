package csi

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"carve.dev/carve/driver/volume"
)

func TestSizeRange(t *testing.T) {
	for _, tc := range []struct {
		name                string
		req, lim            int64
		fs                  string
		wantReq, wantLim    int64
		wantInvalidArgument bool
	}{
		{"default size", 0, 0, "ext4", DefaultVolumeSize, 0, false},
		{"default within limit", 0, 100 * mib, "ext4", 100 * mib, 100 * mib, false},
		{"as asked", 10 * mib, 20 * mib, "ext4", 10 * mib, 20 * mib, false},
		{"xfs raised to its minimum", 10 * mib, 0, "xfs", 300 * mib, 0, false},
		{"xfs kept when the limit forbids", 10 * mib, 20 * mib, "xfs", 10 * mib, 20 * mib, false},
		{"negative", -1, 0, "ext4", 0, 0, true},
		{"required above limit", 30 * mib, 20 * mib, "ext4", 0, 0, true},
	} {
		req, lim, err := sizeRange(&csi.CapacityRange{RequiredBytes: tc.req, LimitBytes: tc.lim}, tc.fs)
		if tc.wantInvalidArgument {
			if !errors.Is(err, volume.ErrInvalidArgument) {
				t.Errorf("%s: error %v, want INVALID_ARGUMENT", tc.name, err)
			}
			continue
		}
		if err != nil || req != tc.wantReq || lim != tc.wantLim {
			t.Errorf("%s: got %d, %d, %v; want %d, %d", tc.name, req, lim, err, tc.wantReq, tc.wantLim)
		}
	}
}

func TestParseParams(t *testing.T) {
	vgs := []string{"vg0", "vg1"}
	p, err := parseParams(map[string]string{"csi.storage.k8s.io/pvc/name": "x"}, vgs)
	if vg, _ := p.VGs.Single(); err != nil || vg != "vg0" || p.vgGiven || p.FsType != "" {
		t.Errorf("defaults: %+v, %v; want vg0 and no fsType", p, err)
	}
	p, err = parseParams(map[string]string{ParamVolumeGroup: "vg1", ParamFsType: "xfs"}, vgs)
	if vg, _ := p.VGs.Single(); err != nil || vg != "vg1" || !p.vgGiven || p.FsType != "xfs" {
		t.Errorf("explicit: %+v, %v", p, err)
	}
	for name, params := range map[string]map[string]string{
		"unknown key":   {"thinpool": "p"},
		"bad fsType":    {ParamFsType: "zfs"},
		"wrong case fs": {ParamFsType: "EXT4"},
		"encryption on": {ParamEncryption: "true"},
		"luks1":         {ParamEncryption: "luks1"},
		"upper LUKS2":   {ParamEncryption: "LUKS2"},
		"spaced luks2":  {ParamEncryption: " luks2"},
	} {
		if _, err := parseParams(params, vgs); !errors.Is(err, volume.ErrInvalidArgument) {
			t.Errorf("%s: error %v, want INVALID_ARGUMENT", name, err)
		}
	}
	for v, want := range map[string]bool{"": false, EncryptionNone: false, EncryptionLUKS2: true} {
		p, err := parseParams(map[string]string{ParamEncryption: v}, vgs)
		if err != nil || p.Encrypted != want {
			t.Errorf("%s=%q: %+v, %v; want encrypted=%t", ParamEncryption, v, p, err, want)
		}
	}
	if _, err := parseParams(nil, nil); !errors.Is(err, volume.ErrInvalidArgument) {
		t.Errorf("no VG anywhere: error %v, want INVALID_ARGUMENT", err)
	}
}

func TestCheckCapability(t *testing.T) {
	ok := []*csi.VolumeCapability{
		mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY),
		{AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER},
			AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}},
	}
	if err := checkCapabilities(ok); err != nil {
		t.Errorf("supported capabilities refused: %v", err)
	}
	bad := map[string]*csi.VolumeCapability{
		"multi-node reader": mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY),
		"unknown mode":      mountCap(csi.VolumeCapability_AccessMode_UNKNOWN),
		"no access type":    {AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}},
		"unsupported fs": {AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "vfat"}}},
	}
	for name, c := range bad {
		if err := checkCapability(c); !errors.Is(err, volume.ErrInvalidArgument) {
			t.Errorf("%s: error %v, want INVALID_ARGUMENT", name, err)
		}
	}
}

func TestParseType(t *testing.T) {
	for _, tc := range []struct {
		params map[string]string
		want   volume.Type
	}{
		{map[string]string{}, volume.Type{}},
		{map[string]string{ParamThinPool: "pool0"}, volume.Type{ThinPool: "pool0"}},
		{map[string]string{ParamStripes: "2", ParamStripeSize: "64Ki"}, volume.Type{Stripes: 2, StripeSize: 64 << 10}},
		{map[string]string{ParamStripes: "4", ParamStripeSize: "1Mi"}, volume.Type{Stripes: 4, StripeSize: 1 << 20}},
		{map[string]string{ParamMirrors: "1"}, volume.Type{Mirrors: 1}},
		// raidLevel raid1 is mirrors, one extra leg unless told.
		{map[string]string{ParamRAIDLevel: "raid1"}, volume.Type{Mirrors: 1}},
		{map[string]string{ParamRAIDLevel: "raid1", ParamMirrors: "2"}, volume.Type{Mirrors: 2}},
		{map[string]string{ParamRAIDLevel: "raid1", ParamRAIDIntegrity: "true"}, volume.Type{Mirrors: 1, Integrity: true}},
		{map[string]string{ParamMirrors: "1", ParamRAIDIntegrity: "true"}, volume.Type{Mirrors: 1, Integrity: true}},
		{map[string]string{ParamMirrors: "1", ParamRAIDIntegrity: "false"}, volume.Type{Mirrors: 1}},
		// The other levels: stripes are data stripes, the least by default.
		{map[string]string{ParamRAIDLevel: "raid5"}, volume.Type{RAID: "raid5", Stripes: 2}},
		{map[string]string{ParamRAIDLevel: "raid5", ParamStripes: "4", ParamStripeSize: "128Ki"},
			volume.Type{RAID: "raid5", Stripes: 4, StripeSize: 128 << 10}},
		{map[string]string{ParamRAIDLevel: "raid6"}, volume.Type{RAID: "raid6", Stripes: 3}},
		{map[string]string{ParamRAIDLevel: "raid10"}, volume.Type{RAID: "raid10", Stripes: 2}},
		{map[string]string{ParamRAIDLevel: "raid10", ParamStripes: "3", ParamMirrors: "1"}, volume.Type{RAID: "raid10", Stripes: 3}},
	} {
		got, err := parseType(tc.params)
		if err != nil || got != tc.want {
			t.Errorf("parseType(%v) = %+v, %v; want %+v", tc.params, got, err, tc.want)
		}
	}
	for _, bad := range []map[string]string{
		{ParamStripes: "1"},
		{ParamStripes: "x"},
		{ParamStripes: "129"},
		{ParamMirrors: "0"},
		{ParamStripeSize: "64Ki"},
		{ParamStripes: "2", ParamStripeSize: "3000"},
		{ParamStripes: "2", ParamStripeSize: "2Ki"},
		{ParamThinPool: "pool", ParamMirrors: "1"},
		{ParamStripes: "2", ParamMirrors: "1"},
		{ParamThinPool: "-bad"},
		// Levels lvm2 does not make, or names that are not a level's.
		{ParamRAIDLevel: "raid4"}, {ParamRAIDLevel: "RAID5"}, {ParamRAIDLevel: ""},
		// Combinations lvm2 would refuse, or Carve does not test.
		{ParamRAIDLevel: "raid1", ParamStripes: "2"},
		{ParamRAIDLevel: "raid6", ParamStripes: "2"},
		{ParamRAIDLevel: "raid5", ParamMirrors: "1"},
		{ParamRAIDLevel: "raid10", ParamMirrors: "2"},
		{ParamRAIDLevel: "raid5", ParamThinPool: "pool"},
		{ParamRAIDLevel: "raid5", ParamRAIDIntegrity: "true"},
		{ParamRAIDIntegrity: "true"},
		{ParamStripes: "2", ParamRAIDIntegrity: "true"},
		{ParamMirrors: "1", ParamRAIDIntegrity: "yes"},
	} {
		if _, err := parseType(bad); !errors.Is(err, volume.ErrInvalidArgument) {
			t.Errorf("parseType(%v) error %v, want INVALID_ARGUMENT", bad, err)
		}
	}
}

func TestParseMutable(t *testing.T) {
	for _, tc := range []struct {
		params  map[string]string
		mirrors int // -1: not given
		ok      bool
	}{
		{nil, -1, true},
		{map[string]string{ParamMirrors: "0"}, 0, true},
		{map[string]string{ParamMirrors: "2"}, 2, true},
		{map[string]string{ParamMirrors: "64"}, 0, false},
		{map[string]string{ParamMirrors: "-1"}, 0, false},
		{map[string]string{ParamMirrors: ""}, 0, false},
		{map[string]string{ParamMirrors: "one"}, 0, false},
		{map[string]string{ParamStripes: "2"}, 0, false},
		{map[string]string{ParamVolumeGroup: "vg0", ParamMirrors: "1"}, 0, false},
		{map[string]string{"XXX_FakeKey": "XXX_FakeValue"}, 0, false},
		{map[string]string{"csi.storage.k8s.io/pvc/name": "x"}, 0, false},
	} {
		m, err := parseMutable(tc.params)
		if !tc.ok {
			if !errors.Is(err, volume.ErrInvalidArgument) {
				t.Errorf("%v: %v, want INVALID_ARGUMENT", tc.params, err)
			}
			continue
		}
		if err != nil || (tc.mirrors < 0) != (m.Mirrors == nil) || (m.Mirrors != nil && *m.Mirrors != tc.mirrors) {
			t.Errorf("%v: %+v, %v; want mirrors %d", tc.params, m, err, tc.mirrors)
		}
	}
	for _, k := range []string{ParamThinPool, ParamEncryption} {
		if _, err := parseMutable(map[string]string{k: "luks2"}); err == nil || !strings.Contains(err.Error(), "cannot change") {
			t.Errorf("the immutable key %s: %v, want it named as such", k, err)
		}
	}
}

// TestWithMutable: mutable parameters win over the StorageClass's, and 0
// mirrors is linear.
func TestWithMutable(t *testing.T) {
	zero, two := 0, 2
	sc := map[string]string{ParamVolumeGroup: "vg0", ParamMirrors: "1"}
	for _, tc := range []struct {
		m    volume.Mutable
		want string
	}{{volume.Mutable{}, "1"}, {volume.Mutable{Mirrors: &zero}, ""}, {volume.Mutable{Mirrors: &two}, "2"}} {
		got := withMutable(sc, tc.m)
		if got[ParamMirrors] != tc.want || got[ParamVolumeGroup] != "vg0" {
			t.Errorf("withMutable(%v) = %v, want mirrors %q", tc.m, got, tc.want)
		}
	}
	if sc[ParamMirrors] != "1" {
		t.Errorf("withMutable changed its argument: %v", sc)
	}
}

// TestLimitParams: IO limits read as bytes per second (with Ki/Mi/Gi) or
// operations per second, in a StorageClass and as mutable parameters, 0
// for none; anything else is INVALID_ARGUMENT; a mutable 0 lifts the
// StorageClass's limit and leaves the others.
func TestLimitParams(t *testing.T) {
	p, err := parseParams(map[string]string{ParamReadBPS: "10Mi", ParamWriteBPS: "1048576", ParamReadIOPS: "300", ParamWriteIOPS: "0"}, []string{"vg0"})
	if err != nil || p.Limits != (volume.IOLimits{ReadBPS: 10 << 20, WriteBPS: 1 << 20, ReadIOPS: 300}) {
		t.Errorf("limits: %+v, %v", p.Limits, err)
	}
	for k, v := range map[string]string{ParamReadBPS: "-1", ParamWriteBPS: "1.5Mi", ParamReadIOPS: "10Ki", ParamWriteIOPS: "4611686018427387905", ParamReadBPS + " ": "1"} {
		if _, err := parseMutable(map[string]string{k: v}); !errors.Is(err, volume.ErrInvalidArgument) {
			t.Errorf("mutable %s=%q: %v, want INVALID_ARGUMENT", k, v, err)
		}
	}
	m, err := parseMutable(map[string]string{ParamWriteBPS: "0", ParamReadIOPS: "50"})
	if err != nil {
		t.Fatal(err)
	}
	got := withMutable(map[string]string{ParamWriteBPS: "1Mi", ParamReadBPS: "2Mi"}, m)
	if _, ok := got[ParamWriteBPS]; ok || got[ParamReadBPS] != "2Mi" || got[ParamReadIOPS] != "50" {
		t.Errorf("withMutable: %v", got)
	}
}

// TestParseVGs: a class's several VGs, by names or a tag, with a policy;
// every malformed or contradictory form is INVALID_ARGUMENT.
func TestParseVGs(t *testing.T) {
	vgs := []string{"vg0"}
	for _, tc := range []struct {
		params map[string]string
		want   volume.VGChoice
	}{
		{map[string]string{ParamVolumeGroups: "nvme0, nvme1"}, volume.VGChoice{Names: []string{"nvme0", "nvme1"}}},
		{map[string]string{ParamVolumeGroups: "a,b", ParamVolumeGroupPolicy: "pack"}, volume.VGChoice{Names: []string{"a", "b"}, Policy: volume.Pack}},
		{map[string]string{ParamVolumeGroups: "@fast", ParamVolumeGroupPolicy: "spread"}, volume.VGChoice{Tag: "fast", Policy: volume.Spread}},
		{map[string]string{ParamVolumeGroups: "only"}, volume.VGChoice{Names: []string{"only"}}},
	} {
		p, err := parseParams(tc.params, vgs)
		if err != nil || !reflect.DeepEqual(p.VGs, tc.want) || !p.vgGiven {
			t.Errorf("%v: %+v, %v; want %+v", tc.params, p.VGs, err, tc.want)
		}
	}
	for name, params := range map[string]map[string]string{
		"both":              {ParamVolumeGroup: "a", ParamVolumeGroups: "a,b"},
		"policy alone":      {ParamVolumeGroupPolicy: "pack"},
		"policy with one":   {ParamVolumeGroup: "a", ParamVolumeGroupPolicy: "pack"},
		"bad policy":        {ParamVolumeGroups: "a,b", ParamVolumeGroupPolicy: "fill"},
		"empty name":        {ParamVolumeGroups: "a,,b"},
		"twice":             {ParamVolumeGroups: "a,b,a"},
		"bad name":          {ParamVolumeGroups: "a,-b"},
		"path":              {ParamVolumeGroups: "a,../b"},
		"empty tag":         {ParamVolumeGroups: "@"},
		"bad tag":           {ParamVolumeGroups: "@a b"},
		"tag and names":     {ParamVolumeGroups: "@a,b"},
		"trailing comma":    {ParamVolumeGroups: "a,"},
		"space only":        {ParamVolumeGroups: " "},
		"policy upper case": {ParamVolumeGroups: "a,b", ParamVolumeGroupPolicy: "Pack"},
	} {
		if _, err := parseParams(params, vgs); !errors.Is(err, volume.ErrInvalidArgument) {
			t.Errorf("%s (%v): error %v, want INVALID_ARGUMENT", name, params, err)
		}
	}
}

// TestParseRecreateBlankWhenLost: the opt-in takes true or false only.
func TestParseRecreateBlankWhenLost(t *testing.T) {
	for v, want := range map[string]bool{"": false, "false": false, "true": true} {
		p, err := parseParams(map[string]string{ParamRecreateBlankWhenLost: v}, []string{"vg0"})
		if err != nil || p.RecreateBlankWhenLost != want {
			t.Errorf("%q: %+v, %v; want %v", v, p, err, want)
		}
	}
	for _, v := range []string{"yes", "True", "1", " true"} {
		if _, err := parseParams(map[string]string{ParamRecreateBlankWhenLost: v}, []string{"vg0"}); !errors.Is(err, volume.ErrInvalidArgument) {
			t.Errorf("%q: %v, want INVALID_ARGUMENT", v, err)
		}
	}
}
