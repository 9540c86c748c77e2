package disks

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// FuzzParse: any input is refused with ErrInvalid or gives a declaration
// that validates, each of whose entries selects disks by something, and
// that marshals back to JSON parsing to the same value.
func FuzzParse(f *testing.F) {
	f.Add("volumeGroups:\n- volumeGroup: fast\n  nodes: [a, b]\n  paths: [\"/dev/disk/by-id/nvme-*\", /dev/sdb]\n")
	f.Add(`{"volumeGroups":[{"volumeGroup":"bulk","nodeSelector":{"example.com/hdd":"yes"},"minSize":"1Ti","maxSize":"20Ti","model":"ST*"}]}`)
	f.Add("volumeGroups:\n- {volumeGroup: v, paths: [/dev/../etc]}\n")
	f.Add("volumeGroups:\n- {volumeGroup: v, minSize: 1.5, maxSize: 2e3}\n")
	f.Add("volumeGroups:\n- {volumeGroup: v, model: x}\n- {volumeGroup: v, nodes: [a], model: y}\n")
	f.Add("volumeGroups: []\nextra: 1\n")
	f.Fuzz(func(t *testing.T, in string) {
		d, err := Parse([]byte(in))
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("accepted %+v, which does not validate: %v", d, err)
		}
		for i, v := range d.VolumeGroups {
			if len(v.Paths) == 0 && v.MinSize == "" && v.MaxSize == "" && v.Model == "" {
				t.Fatalf("entry %d selects every disk: %+v", i, v)
			}
			for _, p := range v.Paths {
				if !strings.HasPrefix(p, "/dev/") || slices.Contains(strings.Split(p, "/"), "..") {
					t.Fatalf("entry %d: path %q accepted", i, p)
				}
			}
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !reflect.DeepEqual(again, d) {
			t.Fatalf("%s parsed to %+v, not %+v", b, again, d)
		}
	})
}

// FuzzParseBlkid: any output is refused or parsed; what is parsed, written
// back as blkid writes it, parses to the same signatures.
func FuzzParseBlkid(f *testing.F) {
	for _, s := range []string{blkidExt4, blkidGPT, blkidLVM, blkidSwap, blkidMD, blkidLUKS, blkidLabel, "", "TYPE=\\", "a=b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseBlkid([]byte(in))
		if err != nil {
			return
		}
		out := export("TYPE", s.Type) + export("PTTYPE", s.PTType) + export("USAGE", s.Usage) +
			export("UUID", s.UUID) + export("LABEL", s.Label)
		again, err := ParseBlkid([]byte(out))
		if err != nil || again != s {
			t.Fatalf("%q parsed to %+v; written back as %q, to %+v, %v", in, s, out, again, err)
		}
	})
}

// export writes a KEY=VALUE line as blkid -o export does, "" for no value.
func export(key, val string) string {
	if val == "" {
		return ""
	}
	var b strings.Builder
	for _, c := range []byte(val) {
		if strings.IndexByte(" \\\"'$`<>", c) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return key + "=" + b.String() + "\n"
}
