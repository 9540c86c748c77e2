package lvm

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The thin-*.xml fixtures are the output of thin-provisioning-tools 0.9.0
// in the VM (lvm2 2.03.16), for a pool of 64 KiB chunks: thin LV o
// (device 1) written at chunks 0, 1 and 10 and 4 KiB in chunk 6;
// snapshot a (device 2); chunk 1 rewritten and chunks 20-22 written;
// snapshot b (device 3). With the pool's metadata snapshot reserved:
//
//	thin-dump-snap.xml          thin_dump --metadata-snap tmeta
//	thin-dump-dev2.xml          thin_dump --metadata-snap --dev-id 2 tmeta
//	thin-dump-nodev.xml         thin_dump --metadata-snap --dev-id 99 tmeta (exit 0)
//	thin-delta-2-3.xml          thin_delta --metadata-snap --snap1 2 --snap2 3 tmeta
//	thin-delta-2-3-verbose.xml  the same with --verbose
//	thin-delta-3-2.xml          thin_delta --metadata-snap --snap1 3 --snap2 2 tmeta

const kib = 1 << 10

// collect parses with parse and returns the ranges handed on.
func collect(t *testing.T, from, limit uint64, parse func(*rangeMerger) error) ([]Range, error) {
	t.Helper()
	var got []Range
	m := &rangeMerger{want: 64 * kib, from: from, limit: limit, each: func(r Range) error {
		got = append(got, r)
		return nil
	}}
	err := parse(m)
	return got, err
}

func chunks(c ...uint64) []Range {
	var out []Range
	for i := 0; i < len(c); i += 2 {
		out = append(out, Range{Offset: c[i] * 64 * kib, Length: c[i+1] * 64 * kib})
	}
	return out
}

func TestParseThinDump(t *testing.T) {
	for _, tc := range []struct {
		file        string
		dev         uint64
		from, limit uint64
		want        []Range
	}{
		// Chunks 0 and 1 (a single_mapping each) merge.
		{"thin-dump-snap.xml", 1, 0, 0, chunks(0, 2, 6, 1, 10, 1, 20, 3)},
		{"thin-dump-snap.xml", 2, 0, 0, chunks(0, 2, 6, 1, 10, 1)},
		{"thin-dump-dev2.xml", 2, 0, 0, chunks(0, 2, 6, 1, 10, 1)},
		{"thin-dump-snap.xml", 3, 0, 64 << 20, chunks(0, 2, 6, 1, 10, 1, 20, 3)},
		// from: a range ending after it comes whole; one ending at it not.
		{"thin-dump-snap.xml", 1, 100 * kib, 0, chunks(0, 2, 6, 1, 10, 1, 20, 3)},
		{"thin-dump-snap.xml", 1, 128 * kib, 0, chunks(6, 1, 10, 1, 20, 3)},
		{"thin-dump-snap.xml", 1, 21 * 64 * kib, 0, chunks(20, 3)},
		{"thin-dump-snap.xml", 1, 23 * 64 * kib, 0, nil},
		// Nothing past the LV's size; a range across it is cut.
		{"thin-dump-snap.xml", 1, 0, 21 * 64 * kib, chunks(0, 2, 6, 1, 10, 1, 20, 1)},
		{"thin-dump-snap.xml", 1, 0, 10 * 64 * kib, chunks(0, 2, 6, 1)},
	} {
		t.Run(fmt.Sprintf("%s/%d/%d/%d", tc.file, tc.dev, tc.from, tc.limit), func(t *testing.T) {
			got, err := collect(t, tc.from, tc.limit, func(m *rangeMerger) error {
				return parseThinDump(bytes.NewReader(fixture(t, tc.file)), tc.dev, m)
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseThinDelta(t *testing.T) {
	for _, tc := range []struct {
		file        string
		left, right uint64
		from        uint64
		want        []Range
	}{
		{"thin-delta-2-3.xml", 2, 3, 0, chunks(1, 1, 20, 3)},
		{"thin-delta-2-3-verbose.xml", 2, 3, 0, chunks(1, 1, 20, 3)},
		{"thin-delta-3-2.xml", 3, 2, 0, chunks(1, 1, 20, 3)}, // left_only counts
		{"thin-delta-2-3.xml", 2, 3, 2 * 64 * kib, chunks(20, 3)},
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.file, tc.from), func(t *testing.T) {
			got, err := collect(t, tc.from, 0, func(m *rangeMerger) error {
				return parseThinDelta(bytes.NewReader(fixture(t, tc.file)), tc.left, tc.right, m)
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// A run of any kind next to a changed one merges with it; runs come
// merged across kinds.
func TestParseThinDeltaMergesKinds(t *testing.T) {
	doc := `<superblock data_block_size="128"><diff left="1" right="2">
	<different begin="0" length="2"/><left_only begin="2" length="1"/><right_only begin="3" length="1"/>
	<same begin="4" length="1"/><different begin="5" length="1"/></diff></superblock>`
	got, err := collect(t, 0, 0, func(m *rangeMerger) error { return parseThinDelta(strings.NewReader(doc), 1, 2, m) })
	if err != nil || !slices.Equal(got, chunks(0, 4, 5, 1)) {
		t.Fatalf("got %v, %v", got, err)
	}
}

// Whatever could make a block go unreported is an error, never a shorter
// list.
func TestParseThinRefuses(t *testing.T) {
	const sb = `<superblock data_block_size="128">`
	dumps := map[string]string{
		"no such device":   string(fixture(t, "thin-dump-nodev.xml")),
		"device twice":     sb + `<device dev_id="1"/><device dev_id="1"/></superblock>`,
		"unknown element":  sb + `<device dev_id="1"><ref name="x"/></device></superblock>`,
		"out of order":     sb + `<device dev_id="1"><single_mapping origin_block="5"/><single_mapping origin_block="4"/></device></superblock>`,
		"overlap":          sb + `<device dev_id="1"><range_mapping origin_begin="0" length="3"/><single_mapping origin_block="2"/></device></superblock>`,
		"empty run":        sb + `<device dev_id="1"><range_mapping origin_begin="0" length="0"/></device></superblock>`,
		"no block size":    `<superblock><device dev_id="1"><single_mapping origin_block="0"/></device></superblock>`,
		"other block size": `<superblock data_block_size="256"><device dev_id="1"/></superblock>`,
		"overflow":         sb + `<device dev_id="1"><single_mapping origin_block="1000000000000000000"/></device></superblock>`,
		"missing attr":     sb + `<device dev_id="1"><range_mapping origin_begin="0"/></device></superblock>`,
		"bad number":       sb + `<device dev_id="1"><single_mapping origin_block="-1"/></device></superblock>`,
		"cut":              sb + `<device dev_id="1"><single_mapping origin_block="0"/>`,
		"not xml":          "syscall 'open' failed",
		"empty":            "",
		"directive":        `<!DOCTYPE x [<!ENTITY a "b">]>` + sb + `<device dev_id="1"/></superblock>`,
		"two roots":        sb + `<device dev_id="1"/></superblock>` + sb + `</superblock>`,
	}
	for name, doc := range dumps {
		if _, err := collect(t, 0, 0, func(m *rangeMerger) error { return parseThinDump(strings.NewReader(doc), 1, m) }); err == nil {
			t.Errorf("thin_dump %s: no error", name)
		}
	}
	if _, err := collect(t, 0, 0, func(m *rangeMerger) error {
		return parseThinDump(bytes.NewReader(fixture(t, "thin-dump-nodev.xml")), 1, m)
	}); !errors.Is(err, ErrNotFound) {
		t.Errorf("thin_dump of a device it does not have: %v, want ErrNotFound", err)
	}
	deltas := map[string]string{
		"other devices":  sb + `<diff left="2" right="1"/></superblock>`,
		"no diff":        sb + `</superblock>`,
		"two diffs":      sb + `<diff left="1" right="2"/><diff left="1" right="2"/></superblock>`,
		"unknown kind":   sb + `<diff left="1" right="2"><moved begin="0" length="1"/></diff></superblock>`,
		"range in short": sb + `<diff left="1" right="2"><different begin="0" length="1"><range begin="0" length="1"/></different></diff></superblock>`,
		"out of order":   sb + `<diff left="1" right="2"><different begin="3" length="1"/><right_only begin="1" length="1"/></diff></superblock>`,
		"cut":            sb + `<diff left="1" right="2"><different begin="3" length="1"/>`,
	}
	for name, doc := range deltas {
		if _, err := collect(t, 0, 0, func(m *rangeMerger) error { return parseThinDelta(strings.NewReader(doc), 1, 2, m) }); err == nil {
			t.Errorf("thin_delta %s: no error", name)
		}
	}
}

// An error from each ends the parse and is returned as it is.
func TestParseThinStopsOnEachError(t *testing.T) {
	stop := errors.New("client gone")
	calls := 0
	m := &rangeMerger{each: func(Range) error { calls++; return stop }}
	err := parseThinDump(bytes.NewReader(fixture(t, "thin-dump-snap.xml")), 1, m)
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("err = %v after %d calls, want the callback's after 1", err, calls)
	}
}

// checkRanges fails t unless got keeps the contract of ThinAllocated and
// ThinDelta: sorted, non-empty, not overlapping, merged, each ending
// after from, none past limit (0: none).
func checkRanges(t *testing.T, got []Range, from, limit uint64) {
	t.Helper()
	for i, r := range got {
		switch {
		case r.Length == 0 || r.End() < r.Offset:
			t.Fatalf("range %d %v: empty or wraps", i, r)
		case r.End() <= from:
			t.Fatalf("range %d %v ends at or before from %d", i, r, from)
		case limit != 0 && r.End() > limit:
			t.Fatalf("range %d %v past the limit %d", i, r, limit)
		case i > 0 && r.Offset <= got[i-1].End():
			t.Fatalf("range %d %v overlaps or touches %v", i, r, got[i-1])
		}
	}
}

// fuzzThin runs parse on data and checks what it hands on.
func fuzzThin(t *testing.T, from, limit uint64, parse func(*rangeMerger) error) {
	var got []Range
	m := &rangeMerger{from: from, limit: limit, each: func(r Range) error {
		got = append(got, r)
		if len(got) > 1<<16 {
			return errors.New("enough")
		}
		return nil
	}}
	if err := parse(m); err == nil {
		checkRanges(t, got, from, limit)
	}
}

// FuzzThinDump feeds thin_dump parsing arbitrary documents: it may refuse
// them, never panic, and what it hands on keeps the contract. Seeds:
// testdata/fuzz/FuzzThinDump and the captured fixtures.
func FuzzThinDump(f *testing.F) {
	for _, file := range []string{"thin-dump-snap.xml", "thin-dump-dev2.xml", "thin-dump-nodev.xml"} {
		f.Add(fixture(f, file), uint8(2), uint32(0), uint32(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, dev uint8, from, limit uint32) {
		fuzzThin(t, uint64(from)*512, uint64(limit)*512, func(m *rangeMerger) error {
			return parseThinDump(bytes.NewReader(data), uint64(dev), m)
		})
	})
}

// FuzzThinDelta is FuzzThinDump's twin for thin_delta's documents.
func FuzzThinDelta(f *testing.F) {
	for _, file := range []string{"thin-delta-2-3.xml", "thin-delta-2-3-verbose.xml"} {
		f.Add(fixture(f, file), uint8(2), uint8(3), uint32(0), uint32(0))
	}
	f.Add(fixture(f, "thin-delta-3-2.xml"), uint8(3), uint8(2), uint32(300), uint32(4096))
	f.Fuzz(func(t *testing.T, data []byte, left, right uint8, from, limit uint32) {
		fuzzThin(t, uint64(from)*512, uint64(limit)*512, func(m *rangeMerger) error {
			return parseThinDelta(bytes.NewReader(data), uint64(left), uint64(right), m)
		})
	})
}
