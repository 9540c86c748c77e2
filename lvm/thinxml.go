package lvm

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"strconv"
)

// The XML of thin-provisioning-tools 0.9.0, read as a stream of tokens:
// a dump of a large pool's mappings is megabytes per terabyte mapped, and
// only the range being merged is held.
//
// thin_dump --metadata-snap [--dev-id N] prints, for each device, its
// mappings in the order of their thin blocks:
//
//	<superblock uuid="" time="2" transaction="3" flags="0" version="2" data_block_size="128" nr_data_blocks="0">
//	  <device dev_id="1" mapped_blocks="7" transaction="0" creation_time="0" snap_time="2">
//	    <single_mapping origin_block="0" data_block="0" time="0"/>
//	    <range_mapping origin_begin="20" data_begin="5" length="3" time="1"/>
//	  </device>
//	</superblock>
//
// A --dev-id the metadata does not have prints the superblock alone and
// exits 0: a device missing from the dump is an error here, never "no
// block allocated".
//
// thin_delta --metadata-snap --snap1 L --snap2 R prints the runs of thin
// blocks in order, "same" ones too (without --verbose each is one
// element; with it, each kind is a block of <range> children):
//
//	<superblock uuid="" time="2" transaction="3" data_block_size="128" nr_data_blocks="0">
//	  <diff left="2" right="3">
//	    <same begin="0" length="1"/>
//	    <different begin="1" length="1"/>
//	    <right_only begin="20" length="3"/>
//	  </diff>
//	</superblock>
//
// different: both map the block, to different data blocks; left_only,
// right_only: one of them maps it (a block unmapped reads zeroes). Each
// is a change between the two. data_block_size is in 512-byte sectors
// (the pool's chunk size). nr_data_blocks is 0 in a metadata snapshot's
// dump: it is not read.

// The tools, from thin-provisioning-tools.
const (
	thinDumpBinary  = "thin_dump"
	thinDeltaBinary = "thin_delta"
)

// Range is a run of bytes of a thin LV, from Offset for Length bytes.
type Range struct {
	Offset, Length uint64
}

// End is the offset just past r.
func (r Range) End() uint64 { return r.Offset + r.Length }

// maxThinBlockSectors is the largest data block dm-thin takes (1 GiB;
// the kernel's DATA_DEV_BLOCK_SIZE_MAX_SECTORS).
const maxThinBlockSectors = 2 << 20

// rangeMerger turns runs of thin blocks into merged byte ranges and hands
// the ones that end after from to each.
type rangeMerger struct {
	blockSize uint64 // bytes; 0 until the superblock says it
	want      uint64 // the pool's chunk size (bytes) the superblock must say; 0: any
	from      uint64
	limit     uint64 // the LV's size: nothing at or past it; 0: none
	each      func(Range) error
	cur       Range // the range being merged; Length 0: none yet
	end       uint64
	started   bool // a run was added (end is meaningful)
}

// setBlockSize takes the superblock's data_block_size (sectors).
func (m *rangeMerger) setBlockSize(v string) error {
	if m.blockSize != 0 {
		return errors.New("a second superblock")
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 || n > maxThinBlockSectors {
		return fmt.Errorf("data_block_size %q: not a thin pool's block size", v)
	}
	if m.want != 0 && n*512 != m.want {
		return fmt.Errorf("data_block_size %d sectors, but the pool's chunk size is %d bytes", n, m.want)
	}
	m.blockSize = n * 512
	return nil
}

// add takes length thin blocks from begin. Runs must come in order and
// not overlap: the tools walk the mapping trees in order, and the
// contract of the callers (sorted, non-overlapping) rests on it.
func (m *rangeMerger) add(begin, length uint64) error {
	if m.blockSize == 0 {
		return errors.New("a mapping before the superblock's data_block_size")
	}
	if length == 0 {
		return fmt.Errorf("an empty run at block %d", begin)
	}
	hiOff, off := bits.Mul64(begin, m.blockSize)
	hiLen, n := bits.Mul64(length, m.blockSize)
	if hiOff != 0 || hiLen != 0 || off+n < off {
		return fmt.Errorf("blocks %d+%d of %d bytes: beyond 64 bits of bytes", begin, length, m.blockSize)
	}
	if m.started && off < m.end {
		return fmt.Errorf("blocks from %d come after (or overlap) the run ending at byte %d: out of order", begin, m.end)
	}
	m.started, m.end = true, off+n
	if m.limit != 0 {
		if off >= m.limit {
			return nil // past the LV's end (a mapping left by a reduce)
		}
		n = min(n, m.limit-off)
	}
	if m.cur.Length != 0 && m.cur.End() == off {
		m.cur.Length += n
		return nil
	}
	if err := m.flush(); err != nil {
		return err
	}
	m.cur = Range{Offset: off, Length: n}
	return nil
}

// flush hands on the range being merged, if it ends after from.
func (m *rangeMerger) flush() error {
	r := m.cur
	m.cur = Range{}
	if r.Length == 0 || r.End() <= m.from {
		return nil
	}
	return m.each(r)
}

// attrs reads the named attributes of an element; a missing or repeated
// one is an error.
func attrs(e xml.StartElement, names ...string) ([]uint64, error) {
	out := make([]uint64, len(names))
	seen := make([]bool, len(names))
	for _, a := range e.Attr {
		for i, n := range names {
			if a.Name.Local != n || a.Name.Space != "" {
				continue
			}
			if seen[i] {
				return nil, fmt.Errorf("<%s>: %s twice", e.Name.Local, n)
			}
			v, err := strconv.ParseUint(a.Value, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("<%s %s=%q>: %w", e.Name.Local, n, a.Value, err)
			}
			out[i], seen[i] = v, true
		}
	}
	for i, n := range names {
		if !seen[i] {
			return nil, fmt.Errorf("<%s>: no %s", e.Name.Local, n)
		}
	}
	return out, nil
}

// attr is the raw value of e's attribute name.
func attr(e xml.StartElement, name string) (string, bool) {
	for _, a := range e.Attr {
		if a.Name.Local == name && a.Name.Space == "" {
			return a.Value, true
		}
	}
	return "", false
}

// xmlTokens walks r's elements: start for each start element with the
// path of its ancestors' names (root first; the slice is reused), end
// after the document's end. Text, comments and the XML declaration are
// skipped; the decoder checks that elements nest.
func xmlTokens(r io.Reader, start func(path []string, e xml.StartElement) error) error {
	d := xml.NewDecoder(r)
	var path []string
	roots := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			if roots == 0 {
				return errors.New("no document")
			}
			return nil
		}
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if len(path) == 0 {
				if roots++; roots > 1 {
					return errors.New("a second document element")
				}
			}
			if len(path) >= 8 {
				return fmt.Errorf("<%s> nested %d deep", t.Name.Local, len(path))
			}
			if err := start(path, t); err != nil {
				return err
			}
			path = append(path, t.Name.Local)
		case xml.EndElement:
			path = path[:len(path)-1]
		case xml.CharData, xml.Comment, xml.ProcInst:
		case xml.Directive:
			return errors.New("an XML directive") // no DTDs, no entities
		}
	}
}

// thinDoc walks a document of the tools: a <superblock> (its
// data_block_size set on m) of <child> elements, each element below it
// handed to start.
func thinDoc(r io.Reader, m *rangeMerger, child string, start func(path []string, e xml.StartElement) error) error {
	return xmlTokens(r, func(path []string, e xml.StartElement) error {
		name := e.Name.Local
		switch {
		case len(path) == 0 && name == "superblock":
			v, _ := attr(e, "data_block_size")
			return m.setBlockSize(v)
		case len(path) == 0:
			return fmt.Errorf("<%s>, want <superblock>", name)
		case len(path) == 1 && name != child:
			return fmt.Errorf("<%s> in <superblock>", name)
		}
		return start(path, e)
	})
}

// parseThinDump reads thin_dump's XML from r and hands m the mappings of
// device dev. The device must be in the dump, once.
func parseThinDump(r io.Reader, dev uint64, m *rangeMerger) error {
	found, in := false, false
	err := thinDoc(r, m, "device", func(path []string, e xml.StartElement) error {
		name := e.Name.Local
		switch len(path) {
		case 1:
			id, err := attrs(e, "dev_id")
			if err != nil {
				return err
			}
			in = id[0] == dev
			if in && found {
				return fmt.Errorf("device %d twice", dev)
			}
			found = found || in
			return nil
		case 2:
			// Every element of the device counts or fails: one not
			// known here (a shared subtree's <ref> in a later version)
			// may hold mappings, and a block missed is a change lost.
			var v []uint64
			var err error
			switch name {
			case "single_mapping":
				if v, err = attrs(e, "origin_block"); err == nil {
					v = append(v, 1)
				}
			case "range_mapping":
				v, err = attrs(e, "origin_begin", "length")
			default:
				return fmt.Errorf("<%s> in <device>", name)
			}
			if err != nil || !in {
				return err
			}
			return m.add(v[0], v[1])
		}
		return fmt.Errorf("<%s> in <%s>", name, path[len(path)-1])
	})
	if err != nil {
		return fmt.Errorf("thin_dump: %w", err)
	}
	if !found {
		return fmt.Errorf("thin_dump: %w: device %d is not in the pool's metadata snapshot", ErrNotFound, dev)
	}
	if err := m.flush(); err != nil {
		return err
	}
	return nil
}

// deltaKinds are thin_delta's runs; true for a change.
var deltaKinds = map[string]bool{"same": false, "different": true, "left_only": true, "right_only": true}

// parseThinDelta reads thin_delta's XML from r, the diff of devices left
// and right, and hands m the runs that differ.
func parseThinDelta(r io.Reader, left, right uint64, m *rangeMerger) error {
	diffs := 0
	// The run being read: its kind, and whether it is a short one (its
	// own begin and length, no children) or a verbose block of <range>s.
	changed, short := false, false
	err := thinDoc(r, m, "diff", func(path []string, e xml.StartElement) error {
		name := e.Name.Local
		switch len(path) {
		case 1:
			ids, err := attrs(e, "left", "right")
			if err != nil {
				return err
			}
			if ids[0] != left || ids[1] != right {
				return fmt.Errorf("diff of devices %d and %d, asked %d and %d", ids[0], ids[1], left, right)
			}
			if diffs++; diffs > 1 {
				return errors.New("a second <diff>")
			}
			return nil
		case 2:
			kind, ok := deltaKinds[name]
			if !ok {
				return fmt.Errorf("<%s> in <diff>", name)
			}
			changed = kind
			if _, short = attr(e, "begin"); !short {
				return nil // a verbose block: its <range>s follow
			}
		case 3:
			if name != "range" || short {
				return fmt.Errorf("<%s> in <%s>", name, path[2])
			}
		default:
			return fmt.Errorf("<%s> in <%s>", name, path[len(path)-1])
		}
		v, err := attrs(e, "begin", "length")
		if err != nil || !changed {
			return err
		}
		return m.add(v[0], v[1])
	})
	if err != nil {
		return fmt.Errorf("thin_delta: %w", err)
	}
	if diffs == 0 {
		return fmt.Errorf("thin_delta: %w: no diff of devices %d and %d", ErrNotFound, left, right)
	}
	return m.flush()
}
