package lvm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A VG's metadata print tells, without running lvm2, whether its metadata
// changed: lvm2 writes every change (an LV made, removed, extended, tagged,
// activated for good; a thin pool extended by dmeventd; a PV added) as a
// new copy in each PV's metadata area and points the area's header at it,
// with the copy's offset, size and checksum. Reading those headers costs
// two sector reads per PV; lvm.Cache compares them with the print taken
// before its report was read, so that a change made outside Carve (an
// administrator's lvcreate, dmeventd's autoextend) shows at the next query
// instead of after the report's max age. Thin pool data filling up is not
// a metadata change: the kernel's count of the pool's blocks, another
// part of the VG's print, shows that (cacheprint.go).
//
// The layout is lvm2's on-disk format (lib/label/label.h,
// lib/format_text/layout.h), little-endian: a label sector ("LABELONE",
// in one of the first four sectors) whose pv_header lists the data areas,
// then the metadata areas, each list ending with a zero entry; at each
// metadata area's offset an mda_header whose first raw_locn is where the
// current metadata is.

const (
	sectorSize     = 512
	labelScan      = 4 // sectors where lvm2 may put the label
	labelID        = "LABELONE"
	labelType      = "LVM2 001"
	pvHeaderUUIDSz = 32
	mdaMagic       = " LVM2 x[5A%r0N*>"
	mdaHeaderSize  = 512
	// lvm2 lists at most a handful of areas; more is a damaged label.
	maxAreas = 16
)

// diskLocn is an area of the PV: offset and size in bytes.
type diskLocn struct{ offset, size uint64 }

// parseLabel finds the label in the first labelScan sectors of a PV and
// returns its metadata areas.
func parseLabel(b []byte) ([]diskLocn, error) {
	for s := 0; s < labelScan && (s+1)*sectorSize <= len(b); s++ {
		sec := b[s*sectorSize : (s+1)*sectorSize]
		if string(sec[:8]) != labelID || string(sec[24:32]) != labelType {
			continue
		}
		off := binary.LittleEndian.Uint32(sec[20:24])
		if off < 32 || off > sectorSize-pvHeaderUUIDSz-8 {
			return nil, fmt.Errorf("label in sector %d: pv_header offset %d out of the sector", s, off)
		}
		return parseAreas(sec[off+pvHeaderUUIDSz+8:])
	}
	return nil, errors.New("no LVM2 label in the first sectors")
}

// parseAreas skips the data areas' list and returns the metadata areas'.
func parseAreas(b []byte) ([]diskLocn, error) {
	var mdas []diskLocn
	list := 0 // 0: data areas, 1: metadata areas
	for i := 0; ; i++ {
		if i >= 2*maxAreas || (i+1)*16 > len(b) {
			return nil, errors.New("pv_header: area lists do not end in the label sector")
		}
		l := diskLocn{binary.LittleEndian.Uint64(b[i*16:]), binary.LittleEndian.Uint64(b[i*16+8:])}
		if l.offset == 0 {
			if list == 1 {
				return mdas, nil
			}
			list++
			continue
		}
		if list == 1 {
			mdas = append(mdas, l)
		}
	}
}

// parseMDAHeader returns the current metadata's place and checksum, as
// "offset+size/checksum", from the mda_header of an area at start.
func parseMDAHeader(b []byte, start uint64) (string, error) {
	if len(b) < mdaHeaderSize {
		return "", errors.New("mda_header: short read")
	}
	if string(b[4:20]) != mdaMagic {
		return "", errors.New("mda_header: no LVM2 metadata magic")
	}
	if got := binary.LittleEndian.Uint64(b[24:32]); got != start {
		return "", fmt.Errorf("mda_header: says it starts at %d, read at %d", got, start)
	}
	off, size := binary.LittleEndian.Uint64(b[40:48]), binary.LittleEndian.Uint64(b[48:56])
	sum := binary.LittleEndian.Uint32(b[56:60])
	return fmt.Sprintf("%d+%d/%08x", off, size, sum), nil
}

// metadataPrint reads the metadata headers of a VG's PVs (device paths)
// and returns them as one string: equal prints, no metadata change
// between them. An error means the print cannot tell (a device not
// readable here, an area lvm2 would not write); the caller then relies on
// its other bounds.
func metadataPrint(pvs []string) (string, error) {
	if len(pvs) == 0 {
		return "", errors.New("no PVs")
	}
	var out strings.Builder
	for _, pv := range pvs {
		p, err := pvPrint(pv)
		if err != nil {
			return "", fmt.Errorf("PV %s: %w", pv, err)
		}
		fmt.Fprintf(&out, "%s=%s;", pv, p)
	}
	return out.String(), nil
}

// pvPrint reads one PV's label and each metadata area's header, with
// O_DIRECT: lvm2 writes them past the page cache, so a buffered read could
// return what was there before.
func pvPrint(dev string) (string, error) {
	f, err := os.OpenFile(dev, os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	label, err := readDirect(f, 0, labelScan*sectorSize)
	if err != nil {
		return "", fmt.Errorf("read label: %w", err)
	}
	mdas, err := parseLabel(label)
	if err != nil {
		return "", err
	}
	if len(mdas) == 0 {
		return "no-mda", nil // pvcreate --metadatacopies 0: the VG's other PVs tell
	}
	var prints []string
	for _, m := range mdas {
		if m.offset > 1<<62 {
			return "", fmt.Errorf("metadata area at %d: beyond any device", m.offset)
		}
		h, err := readDirect(f, int64(m.offset), mdaHeaderSize)
		if err != nil {
			return "", fmt.Errorf("read mda_header at %d: %w", m.offset, err)
		}
		p, err := parseMDAHeader(h, m.offset)
		if err != nil {
			return "", err
		}
		prints = append(prints, p)
	}
	return strings.Join(prints, ","), nil
}

// directBlock is the unit of O_DIRECT reads: a multiple of every logical
// block size (512 and 4096 bytes).
const directBlock = 4096

// readDirect reads n bytes at off through O_DIRECT, by reading the
// aligned blocks around them into an aligned buffer.
func readDirect(f *os.File, off int64, n int) ([]byte, error) {
	start := off / directBlock * directBlock
	end := (off + int64(n) + directBlock - 1) / directBlock * directBlock
	buf := alignedBuffer(int(end - start))
	got, err := f.ReadAt(buf, start)
	if got < int(off-start)+n {
		if err == nil {
			err = errors.New("short read")
		}
		return nil, err
	}
	return buf[off-start : off-start+int64(n)], nil
}

// alignedBuffer is n bytes whose start is aligned for O_DIRECT.
func alignedBuffer(n int) []byte {
	b := make([]byte, n+directBlock)
	skip := 0
	if r := int(uintptr(unsafe.Pointer(&b[0])) % directBlock); r != 0 {
		skip = directBlock - r
	}
	return b[skip : skip+n]
}
