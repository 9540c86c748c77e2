package csi

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"carve.dev/carve/driver/nodefs"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// StorageClass parameters Carve understands.
const (
	ParamVolumeGroup = "volumeGroup"
	// Several VGs (volume.VGChoice): comma-separated names, or "@tag"
	// for the served VGs with an lvm2 tag; and how one is picked per
	// volume (spread, the default, or pack).
	ParamVolumeGroups      = "volumeGroups"
	ParamVolumeGroupPolicy = "volumeGroupPolicy"
	ParamFsType            = "fsType"
	ParamThinPool          = "thinPool"
	ParamStripes           = "stripes"
	ParamStripeSize        = "stripeSize"
	ParamMirrors           = "mirrors"
	// The RAID level (raid1, raid10, raid5, raid6; see parseType) and,
	// for raid1, dm-integrity under each leg ("true").
	ParamRAIDLevel     = "raidLevel"
	ParamRAIDIntegrity = "raidIntegrity"
	ParamEncryption    = "encryption"
	// IO limits for the pods using the volume (volume.IOLimits): bytes
	// per second ("10Mi") and operations per second, 0 for none.
	ParamReadBPS   = "readBytesPerSecond"
	ParamWriteBPS  = "writeBytesPerSecond"
	ParamReadIOPS  = "readIOPS"
	ParamWriteIOPS = "writeIOPS"
	// A write cache (volume.WriteCache): its size ("1Gi"; 0 for none)
	// and the fast PVs of the volume's VG it goes on, comma-separated
	// paths or "@tag" for the PVs with an lvm2 tag.
	ParamWriteCache    = "writeCache"
	ParamWriteCachePVs = "writeCachePVs"
	// mkfs options for a blank volume's filesystem, from a vetted set per
	// filesystem (nodefs.ParseMkfsOptions): "-N 200000 -E lazy_itable_init=0".
	ParamMkfsOptions = "mkfsOptions"
	// "true": when a volume's LV is lost (its disk replaced), the node
	// recreates it blank in place (cluster mode; see README).
	ParamRecreateBlankWhenLost = "recreateBlankWhenLost"
)

// Values of ParamEncryption: LUKS2 on the LV, or none (the default).
const (
	EncryptionLUKS2 = "luks2"
	EncryptionNone  = "none"
)

var knownParams = []string{ParamVolumeGroup, ParamVolumeGroups, ParamVolumeGroupPolicy, ParamFsType, ParamThinPool, ParamStripes, ParamStripeSize, ParamMirrors,
	ParamRAIDLevel, ParamRAIDIntegrity, ParamEncryption,
	ParamReadBPS, ParamWriteBPS, ParamReadIOPS, ParamWriteIOPS, ParamWriteCache, ParamWriteCachePVs, ParamMkfsOptions,
	ParamRecreateBlankWhenLost}

// mutableParams may also come as mutable parameters (CreateVolume's and
// ControllerModifyVolume's mutable_parameters; a VolumeAttributesClass in
// Kubernetes), and ControllerModifyVolume changes them on a live volume.
// As StorageClass parameters they are fixed at creation; CSI has mutable
// parameters take precedence over those.
var mutableParams = []string{ParamMirrors, ParamReadBPS, ParamWriteBPS, ParamReadIOPS, ParamWriteIOPS, ParamWriteCache, ParamWriteCachePVs}

// volumeParams are the parsed CreateVolume / GetCapacity parameters.
type volumeParams struct {
	// VGs are the VGs the volume may go in: the one named or the
	// default, or a class's several (volumeGroups).
	VGs    volume.VGChoice
	FsType string
	Type   volume.Type
	// vgGiven: the parameters named the VG (a restore may otherwise use
	// the source's).
	vgGiven bool
	// Encrypted: encryption=luks2.
	Encrypted bool
	// Limits: the IO limit parameters.
	Limits volume.IOLimits
	// WriteCache: the write cache parameters, nil for none.
	WriteCache *volume.WriteCache
	// RecreateBlankWhenLost: recreateBlankWhenLost=true.
	RecreateBlankWhenLost bool
}

// parseParams validates params; an unknown key is an error (a typo in a
// StorageClass should fail loudly, not carve something else).
func parseParams(params map[string]string, vgs []string) (volumeParams, error) {
	var unknown []string
	for k := range params {
		if !slices.Contains(knownParams, k) && !strings.HasPrefix(k, volume.COParamPrefix) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return volumeParams{}, invalidArgument("unknown parameters %v (known: %v)", unknown, knownParams)
	}
	p := volumeParams{FsType: params[ParamFsType]}
	t, err := parseType(params)
	if err != nil {
		return volumeParams{}, err
	}
	p.Type = t
	if p.VGs, p.vgGiven, err = parseVGs(params, vgs); err != nil {
		return volumeParams{}, err
	}
	if p.FsType != "" && !slices.Contains(volume.FSTypes, p.FsType) {
		return volumeParams{}, invalidArgument("parameter %s=%q not supported (supported: %v)", ParamFsType, p.FsType, volume.FSTypes)
	}
	if p.Encrypted, err = parseEncryption(params[ParamEncryption]); err != nil {
		return volumeParams{}, err
	}
	if p.RecreateBlankWhenLost, err = parseBool(params, ParamRecreateBlankWhenLost); err != nil {
		return volumeParams{}, err
	}
	var m volume.Mutable
	if err := parseLimits(params, &m); err != nil {
		return volumeParams{}, err
	}
	p.Limits = m.Limits(volume.IOLimits{})
	if err := parseWriteCache(params, &m); err != nil {
		return volumeParams{}, err
	}
	if m.WriteCache != nil && m.WriteCache.Size > 0 {
		p.WriteCache = m.WriteCache
		if err := p.Type.CanCache(); err != nil {
			return volumeParams{}, err
		}
	}
	return p, nil
}

// parseVGs reads the VGs a volume may go in: volumeGroup names one,
// volumeGroups several or a tag ("@fast"), volumeGroupPolicy how one is
// picked; none of them, the node's first served VG (vgs[0]). given
// tells whether the parameters named any.
func parseVGs(params map[string]string, vgs []string) (c volume.VGChoice, given bool, err error) {
	one, many := params[ParamVolumeGroup], params[ParamVolumeGroups]
	policy, hasPolicy := params[ParamVolumeGroupPolicy]
	switch {
	case one != "" && many != "":
		return c, false, invalidArgument("parameters %s and %s exclude each other", ParamVolumeGroup, ParamVolumeGroups)
	case many == "" && hasPolicy:
		return c, false, invalidArgument("parameter %s given without %s", ParamVolumeGroupPolicy, ParamVolumeGroups)
	case one != "":
		return volume.OneVG(one), true, nil
	case many == "":
		if len(vgs) == 0 {
			return c, false, invalidArgument("parameter %s missing and no default volume group", ParamVolumeGroup)
		}
		return volume.OneVG(vgs[0]), false, nil
	}
	c.Policy = volume.VGPolicy(policy)
	if tag, ok := strings.CutPrefix(strings.TrimSpace(many), "@"); ok {
		c.Tag = tag
	} else {
		for _, n := range strings.Split(many, ",") {
			c.Names = append(c.Names, strings.TrimSpace(n))
		}
	}
	if err := c.Validate(); err != nil {
		return volume.VGChoice{}, false, invalidArgument("parameters %s=%q, %s=%q: %v", ParamVolumeGroups, many, ParamVolumeGroupPolicy, policy, err)
	}
	return c, true, nil
}

// parseWriteCache reads the write cache parameters present in params into
// m: a size (bytes, or Ki/Mi/Gi; 0 for no cache) and, for a cache, the
// PVs it goes on. PVs without a size name no cache: refused, as a class
// that seems to ask for one and gets none would be.
func parseWriteCache(params map[string]string, m *volume.Mutable) error {
	s, ok := params[ParamWriteCache]
	pvs, pvsOK := params[ParamWriteCachePVs]
	if !ok {
		if pvsOK {
			return invalidArgument("parameter %s given without %s (the cache's size)", ParamWriteCachePVs, ParamWriteCache)
		}
		return nil
	}
	size, err := parseSize(s)
	if err != nil || size > maxLimit {
		return invalidArgument("parameter %s=%q: want the cache's size in bytes, such as 1073741824 or 1Gi (0: no cache)", ParamWriteCache, s)
	}
	c := volume.WriteCache{Size: size}
	if size > 0 {
		for _, r := range strings.Split(pvs, ",") {
			if r = strings.TrimSpace(r); r != "" {
				c.On = append(c.On, r)
			}
		}
		if err := lvm.ValidatePVRefs(c.On); err != nil {
			return invalidArgument("parameter %s=%q: want the fast PVs of the volume's VG, comma-separated: paths (/dev/nvme1n1) or @tag for the PVs with an lvm2 tag: %v",
				ParamWriteCachePVs, pvs, err)
		}
	}
	m.WriteCache = &c
	return nil
}

// limitParams are the IO limit parameters and where each goes in a
// Mutable.
func limitParams(m *volume.Mutable) []struct {
	key   string
	bytes bool // bytes per second, with Ki/Mi/Gi; otherwise a count
	to    **uint64
} {
	return []struct {
		key   string
		bytes bool
		to    **uint64
	}{{ParamReadBPS, true, &m.ReadBPS}, {ParamWriteBPS, true, &m.WriteBPS}, {ParamReadIOPS, false, &m.ReadIOPS}, {ParamWriteIOPS, false, &m.WriteIOPS}}
}

// maxLimit bounds an IO limit: the kernel reads io.max's values as 64-bit
// numbers with the largest meaning no limit; nothing real comes near 2^62.
const maxLimit = 1 << 62

// parseLimits reads the IO limit parameters present in params into m.
func parseLimits(params map[string]string, m *volume.Mutable) error {
	for _, p := range limitParams(m) {
		s, ok := params[p.key]
		if !ok {
			continue
		}
		var n uint64
		var err error
		if p.bytes {
			n, err = parseSize(s)
		} else {
			n, err = strconv.ParseUint(s, 10, 64)
		}
		if err != nil || n > maxLimit {
			want := "a count of operations per second, such as 500"
			if p.bytes {
				want = "bytes per second, such as 10485760 or 10Mi"
			}
			return invalidArgument("parameter %s=%q: want %s (0: no limit)", p.key, s, want)
		}
		*p.to = &n
	}
	return nil
}

// mkfsOptions reads the mkfs options of params (a StorageClass's, or a
// volume context) for fsType, the filesystem they will make: CreateVolume
// reads them once the filesystem is chosen, NodeStage again before mkfs
// runs. An option outside fsType's vetted set, or a bad value, is
// INVALID_ARGUMENT.
func mkfsOptions(fsType string, params map[string]string) (nodefs.MkfsOptions, error) {
	o, err := nodefs.ParseMkfsOptions(fsType, params[ParamMkfsOptions])
	if err != nil {
		return nodefs.MkfsOptions{}, fmt.Errorf("parameter %s: %w", ParamMkfsOptions, err)
	}
	return o, nil
}

// parseBool reads a true/false parameter, false when absent; any other
// spelling is refused, as a misspelt opt-in must not pass for an opt-out.
func parseBool(params map[string]string, key string) (bool, error) {
	switch v := params[key]; v {
	case "true":
		return true, nil
	case "", "false":
		return false, nil
	default:
		return false, invalidArgument("parameter %s=%q: want true or false", key, v)
	}
}

// parseEncryption reads the encryption parameter: luks2, or none (also
// when absent). Anything else is refused: a misspelt value must not carve a
// plaintext volume that was meant to be encrypted.
func parseEncryption(v string) (bool, error) {
	switch v {
	case EncryptionLUKS2:
		return true, nil
	case "", EncryptionNone:
		return false, nil
	}
	return false, invalidArgument("parameter %s=%q: want %s or %s", ParamEncryption, v, EncryptionLUKS2, EncryptionNone)
}

// Bounds of the type parameters (lvm2's own limits). A stripe lies in one
// extent, and lvm2's extents are at most 16 GiB.
const (
	maxStripes    = 128
	maxMirrors    = 63
	maxStripeSize = 16 << 30
)

// Values of ParamRAIDLevel.
const (
	RAIDLevel1  = "raid1"
	RAIDLevel10 = "raid10"
	RAIDLevel5  = lvm.RAID5
	RAIDLevel6  = lvm.RAID6
)

var raidLevels = []string{RAIDLevel1, RAIDLevel10, RAIDLevel5, RAIDLevel6}

// parseType reads the volume type: thick linear unless exactly one of
// thinPool, stripes (with stripeSize), mirrors or raidLevel is given; a
// raidLevel takes stripes, stripeSize and mirrors as its own (parseRAID).
func parseType(params map[string]string) (volume.Type, error) {
	var t volume.Type
	var err error
	if t.Stripes, err = intParam(params, ParamStripes, 2, maxStripes); err != nil {
		return t, err
	}
	if t.Mirrors, err = intParam(params, ParamMirrors, 1, maxMirrors); err != nil {
		return t, err
	}
	if err := parseRAID(params, &t); err != nil {
		return t, err
	}
	if s := params[ParamStripeSize]; s != "" {
		if t.Stripes == 0 {
			return t, invalidArgument("parameter %s needs %s", ParamStripeSize, ParamStripes)
		}
		if t.StripeSize, err = parseSize(s); err != nil || t.StripeSize&(t.StripeSize-1) != 0 || t.StripeSize < 4096 ||
			t.StripeSize > maxStripeSize {
			return t, invalidArgument("parameter %s=%q: want a power of two from 4Ki to 16Gi, such as 64Ki", ParamStripeSize, s)
		}
	}
	if t.ThinPool = params[ParamThinPool]; t.ThinPool != "" {
		if err := lvm.ValidateLVName(t.ThinPool); err != nil {
			return t, invalidArgument("parameter %s: %v", ParamThinPool, err)
		}
	}
	kinds := 0
	for _, set := range []bool{t.ThinPool != "", t.Stripes > 0 && t.RAID == "", t.Mirrors > 0, t.RAID != ""} {
		if set {
			kinds++
		}
	}
	if kinds > 1 {
		return t, invalidArgument("parameters %s, %s, %s and %s exclude each other (a %s takes %s and %s as its own)",
			ParamThinPool, ParamStripes, ParamMirrors, ParamRAIDLevel, ParamRAIDLevel, ParamStripes, ParamMirrors)
	}
	return t, nil
}

// parseRAID reads raidLevel and raidIntegrity into t, whose stripes and
// mirrors parseType has read, checking each level's combination before
// any command runs, as lvm2 would refuse it after:
//   - raid1: mirrors extra legs (default 1), no stripes; the same volume
//     as mirrors alone.
//   - raid10: stripes data stripes (default and at least 2), each
//     mirrored once: 2 × stripes PVs. lvm2 keeps two copies, so mirrors
//     may only be absent or 1.
//   - raid5: stripes data stripes (default and at least 2) and their
//     parity: stripes + 1 PVs.
//   - raid6: stripes data stripes (default and at least 3) and two
//     parities: stripes + 2 PVs.
//
// raidIntegrity "true" puts dm-integrity under each raid1 leg: only
// raid1 (raidLevel raid1, or mirrors alone), as lvm2 2.03 adds it to
// raid1 and Carve tests it there only.
func parseRAID(params map[string]string, t *volume.Type) error {
	level, given := params[ParamRAIDLevel]
	switch {
	case !given:
	case !slices.Contains(raidLevels, level):
		return invalidArgument("parameter %s=%q: want one of %v", ParamRAIDLevel, level, raidLevels)
	case level == RAIDLevel1:
		if t.Stripes > 0 {
			return invalidArgument("parameter %s=%s takes no %s: a raid1 leg is one PV (%s gives striped mirrors)",
				ParamRAIDLevel, level, ParamStripes, RAIDLevel10)
		}
		t.Mirrors = max(t.Mirrors, 1)
	default:
		if level == RAIDLevel10 && t.Mirrors > 1 {
			return invalidArgument("parameter %s=%s takes %s 1 or none, not %d: lvm2's raid10 keeps two copies of each stripe",
				ParamRAIDLevel, level, ParamMirrors, t.Mirrors)
		}
		if level != RAIDLevel10 && t.Mirrors > 0 {
			return invalidArgument("parameter %s=%s takes no %s: its redundancy is parity", ParamRAIDLevel, level, ParamMirrors)
		}
		least := lvm.MinRAIDStripes(level)
		if t.Stripes == 0 {
			t.Stripes = least
		}
		if t.Stripes < least {
			return invalidArgument("parameter %s=%s needs %s of at least %d (%d PVs), not %d",
				ParamRAIDLevel, level, ParamStripes, least, lvm.RAIDImages(level, least), t.Stripes)
		}
		t.RAID, t.Mirrors = level, 0
	}
	integrity, err := parseBool(params, ParamRAIDIntegrity)
	if err != nil {
		return err
	}
	if integrity && t.Mirrors == 0 {
		return invalidArgument("parameter %s=true needs raid1 (%s=%s, or %s): lvm2 adds integrity to raid1 legs only here",
			ParamRAIDIntegrity, ParamRAIDLevel, RAIDLevel1, ParamMirrors)
	}
	t.Integrity = integrity
	return nil
}

// intParam reads an optional integer parameter within [lo, hi].
func intParam(params map[string]string, key string, lo, hi int) (int, error) {
	s, ok := params[key]
	if !ok || s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, invalidArgument("parameter %s=%q: want an integer from %d to %d", key, s, lo, hi)
	}
	return n, nil
}

// parseSize reads bytes with an optional binary suffix: "65536", "64Ki",
// "1Mi". The same size reads the same with or without a suffix (a bound
// on the number alone once let "2147483648Gi" through where its value in
// bytes was refused); a size beyond 64 bits is an error.
func parseSize(s string) (uint64, error) {
	mult := uint64(1)
	for suffix, m := range map[string]uint64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			s, mult = n, m
			break
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, err
	}
	if n > math.MaxUint64/mult {
		return 0, strconv.ErrRange
	}
	return n * mult, nil
}

// parseMutable validates mutable parameters: every key must be one of
// mutableParams. Any other key is INVALID_ARGUMENT, a known one that cannot
// change (volumeGroup, fsType, thinPool, stripes, stripeSize, encryption)
// with that reason: a VolumeAttributesClass that cannot be honoured must
// say so, not be taken as done. CO metadata (csi.storage.k8s.io/) has no
// place here either. Unlike a StorageClass's mirrors, a mutable mirrors may
// be 0: a raid1 volume back to linear.
func parseMutable(params map[string]string) (volume.Mutable, error) {
	var m volume.Mutable
	var unknown, immutable []string
	for k := range params {
		switch {
		case slices.Contains(mutableParams, k):
		case slices.Contains(knownParams, k):
			immutable = append(immutable, k)
		default:
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return m, invalidArgument("unknown mutable parameters %v (mutable: %v)", unknown, mutableParams)
	}
	if len(immutable) > 0 {
		sort.Strings(immutable)
		return m, invalidArgument("parameters %v cannot change once a volume exists (mutable: %v)", immutable, mutableParams)
	}
	if s, ok := params[ParamMirrors]; ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > maxMirrors {
			return m, invalidArgument("mutable parameter %s=%q: want an integer from 0 to %d", ParamMirrors, s, maxMirrors)
		}
		m.Mirrors = &n
	}
	if err := parseLimits(params, &m); err != nil {
		return m, err
	}
	if err := parseWriteCache(params, &m); err != nil {
		return m, err
	}
	return m, nil
}

// withMutable is params with the mutable parameters m in place of theirs:
// what shapes a new volume. A 0 (mirrors: linear; a limit: none) removes
// the key.
func withMutable(params map[string]string, m volume.Mutable) map[string]string {
	if m.IsZero() {
		return params
	}
	out := make(map[string]string, len(params)+1)
	for k, v := range params {
		out[k] = v
	}
	if m.Mirrors != nil {
		delete(out, ParamMirrors)
		if *m.Mirrors > 0 {
			out[ParamMirrors] = strconv.Itoa(*m.Mirrors)
		}
	}
	for _, p := range limitParams(&m) {
		if *p.to == nil {
			continue
		}
		delete(out, p.key)
		if n := **p.to; n > 0 {
			out[p.key] = strconv.FormatUint(n, 10)
		}
	}
	if c := m.WriteCache; c != nil {
		delete(out, ParamWriteCache)
		delete(out, ParamWriteCachePVs)
		if c.Size > 0 {
			out[ParamWriteCache] = strconv.FormatUint(c.Size, 10)
			out[ParamWriteCachePVs] = strings.Join(c.On, ",")
		}
	}
	return out
}
