package lvm

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A PV's label sector and metadata area header as lvm2 2.03 wrote them on
// a 6 GiB disk (read with dd in the test VM: sector 1, and the header at
// 4096): one data area at 1 MiB, one metadata area at 4 KiB of 1020 KiB,
// whose current metadata is 0x882 bytes at 0x3200 with checksum 1c3e6bd5.
const (
	labelSectorHex = "4c4142454c4f4e450100000000000000" +
		"fce41241200000004c564d3220303031" +
		"4f356341356a6165633649653448796d" +
		"78327048666d4339396a346659303769" +
		"00000080010000000000100000000000" +
		"00000000000000000000000000000000" +
		"00000000000000000010000000000000" +
		"00f00f00000000000000000000000000"
	mdaHeaderHex = "85fab6ad204c564d3220785b35412572" +
		"304e2a3e010000000010000000000000" +
		"00f00f00000000000032000000000000" +
		"8208000000000000d56b3e1c00000000"
)

func fromHex(t testing.TB, s string, size int) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, size)
	copy(out, b)
	return out
}

// realPV is the first 4 sectors of that PV (the label in sector 1) and the
// header sector.
func realPV(t testing.TB) (label, header []byte) {
	label = make([]byte, labelScan*sectorSize)
	copy(label[sectorSize:], fromHex(t, labelSectorHex, sectorSize))
	return label, fromHex(t, mdaHeaderHex, mdaHeaderSize)
}

func TestParseARealPVsMetadataPlace(t *testing.T) {
	label, header := realPV(t)
	mdas, err := parseLabel(label)
	if err != nil {
		t.Fatal(err)
	}
	if len(mdas) != 1 || mdas[0] != (diskLocn{offset: 4096, size: 0xff000}) {
		t.Fatalf("metadata areas %+v, want one at 4096 of 0xff000 bytes", mdas)
	}
	got, err := parseMDAHeader(header, mdas[0].offset)
	if err != nil || got != "12800+2178/1c3e6bd5" {
		t.Errorf("print %q, %v; want 12800+2178/1c3e6bd5", got, err)
	}
}

func TestMetadataHeadersLVMWouldNotWriteAreRefused(t *testing.T) {
	label, header := realPV(t)
	cases := map[string]func() error{
		"no label": func() error { _, err := parseLabel(make([]byte, labelScan*sectorSize)); return err },
		"pv_header past the sector": func() error {
			l := append([]byte(nil), label...)
			l[sectorSize+20], l[sectorSize+21] = 0xf4, 0x01 // 500
			_, err := parseLabel(l)
			return err
		},
		"area lists without their end": func() error {
			l := append([]byte(nil), label...)
			for i := sectorSize + 72; i < 2*sectorSize; i++ {
				l[i] = 1
			}
			_, err := parseLabel(l)
			return err
		},
		"header without the magic": func() error {
			h := append([]byte(nil), header...)
			h[5] = 'X'
			_, err := parseMDAHeader(h, 4096)
			return err
		},
		"header of another place": func() error { _, err := parseMDAHeader(header, 8192); return err },
		"short header":            func() error { _, err := parseMDAHeader(header[:100], 4096); return err },
	}
	for name, parse := range cases {
		if err := parse(); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestMetadataPrintOfAFile(t *testing.T) {
	path := realPVFile(t)
	got, err := metadataPrint([]string{path})
	if err != nil {
		// O_DIRECT is refused by some filesystems (tmpfs): the print
		// reads block devices, where it is not.
		if strings.Contains(err.Error(), "invalid argument") {
			t.Skipf("O_DIRECT on %s: %v", path, err)
		}
		t.Fatal(err)
	}
	if want := path + "=12800+2178/1c3e6bd5;"; got != want {
		t.Errorf("print %q, want %q", got, want)
	}
}

func FuzzMetadataHeaders(f *testing.F) {
	label, header := realPV(f)
	f.Add(label, header)
	f.Add(make([]byte, 2048), make([]byte, 512))
	f.Fuzz(func(t *testing.T, label, header []byte) {
		if mdas, err := parseLabel(label); err == nil {
			if len(mdas) > maxAreas*2 {
				t.Errorf("%d metadata areas from one sector", len(mdas))
			}
			for _, m := range mdas {
				if m.offset == 0 {
					t.Errorf("a metadata area at offset 0: %+v", mdas)
				}
			}
		}
		if p, err := parseMDAHeader(header, 4096); err == nil && p == "" {
			t.Error("an empty print without an error")
		}
	})
}

// realPVFile writes realPV's label and header where a PV has them, in a
// file of 8 KiB, and returns its path.
func realPVFile(t *testing.T) string {
	t.Helper()
	label, header := realPV(t)
	dev := make([]byte, 8192)
	copy(dev, label)
	copy(dev[4096:], header)
	path := filepath.Join(t.TempDir(), "pv")
	if err := os.WriteFile(path, dev, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
