package lvmvol

import (
	"strings"
	"testing"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// FuzzTags: the tags a volume is created with are its state, read back by
// every later call. For a request the CSI layer can send (valid names, a
// hex digest, a type within lvm2's bounds) every tag is one lvm2 takes;
// the type, the name (when it can be a tag at all) and the content source
// read back from them as they were asked.
func FuzzTags(f *testing.F) {
	f.Add("pvc-1", "0123abcd", 0, 0, "", "", "")
	f.Add("Sanity Name 1", "0123abcd", 3, 0, "", "snapshot", "snap-pvc-0")
	f.Add("data/x=y", "ff", 0, 2, "", "volume", "pvc-0")
	f.Add("n", "00", 0, 0, "pool", "volume", "pvc-0")
	f.Add("carve.dev/stripes=3", "00", 1, 0, "", "", "")
	f.Add(strings.Repeat("n", 1024), "00", 128, 0, "", "", "")
	f.Fuzz(func(t *testing.T, name, digest string, stripes, mirrors int, pool, kind, source string) {
		kinds := 0
		for _, set := range []bool{stripes > 1, mirrors > 0, pool != ""} {
			if set {
				kinds++
			}
		}
		if strings.Trim(digest, "0123456789abcdef") != "" || digest == "" || len(digest) > 64 || stripes < 0 || stripes > 128 || mirrors < 0 || mirrors > 63 ||
			kinds > 1 || (pool != "" && lvm.ValidateLVName(pool) != nil) {
			return // the CSI layer sends none of these (FuzzParseType)
		}
		// Each source twice: on this node ("n") and on another, whose
		// whole ID the tag records (remote.go).
		for _, node := range []string{"n", "node-b.example"} {
			checkTags(t, name, digest, stripes, mirrors, pool, kind, source, node)
		}
	})
}

func checkTags(t *testing.T, name, digest string, stripes, mirrors int, pool, kind, source, node string) {
	t.Helper()
	m := &Manager{node: "n"}
	req := volume.CreateRequest{Name: name, ParamsDigest: digest, Type: volume.Type{Stripes: stripes, Mirrors: mirrors, ThinPool: pool}}
	tags := createTags(req)
	if kind == volume.SourceSnapshot || kind == volume.SourceVolume {
		if lvm.ValidateLVName(source) != nil {
			return
		}
		req.Source = &volume.ContentSource{Kind: kind, ID: volume.ID{Node: node, VG: "vg0", LV: source}}
		tags = append(tags, m.sourceTag(req.Source))
	}
	for _, tag := range tags {
		if err := lvm.ValidateTag(tag); err != nil {
			t.Fatalf("%+v: tag %q: %v", req, tag, err)
		}
	}
	lv := lvm.LV{Name: "x", VGName: "vg0", Tags: tags, PoolLV: pool}
	want := req.Type
	if want.Stripes == 1 {
		want.Stripes = 0
	}
	if got := typeOf(lv); got != want {
		t.Fatalf("%+v: type read back as %+v", req, got)
	}
	if got := tagValue(lv, tagParamsPrefix); got != digest {
		t.Fatalf("%+v: digest read back as %q", req, got)
	}
	named := lvm.ValidateTag(tagNamePrefix+name) == nil
	if got := tagValue(lv, tagNamePrefix); (named && got != name) || (!named && got != "") {
		t.Fatalf("%+v: name read back as %q", req, got)
	}
	got := m.contentSourceOf(lv)
	switch {
	case req.Source == nil && got != nil:
		t.Fatalf("%+v: source %+v read back", req, got)
	case req.Source != nil && (got == nil || *got != *req.Source):
		t.Fatalf("%+v: source %+v read back as %+v", req, req.Source, got)
	case !m.sourceMatches(lv, req.Source):
		t.Fatalf("%+v: source does not match its own tags", req)
	}
}
