package transfer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"testing"
)

// FuzzReadFrame: a peer's bytes never crash the frame reader, and every
// frame it accepts is within the protocol's bounds and encodes back to
// bytes that read as the same frame.
func FuzzReadFrame(f *testing.F) {
	var seeds bytes.Buffer
	for _, fr := range []frame{
		{kind: kindHeader, off: 5 << 20, segment: 64 << 20},
		{kind: kindData, off: 4096, data: []byte("carve")},
		{kind: kindZero, off: 0, n: 1 << 30},
		{kind: kindKeep, off: 64 << 10, n: 1 << 20},
		{kind: kindSegment, off: 64 << 20, digest: [32]byte{1, 2, 3}},
		{kind: kindEnd, off: 5 << 20},
		{kind: kindError, code: CodeRefused, msg: "no volume of node b is restored from a/vg/s"},
	} {
		seeds.Reset()
		if err := writeFrame(&seeds, fr); err != nil {
			f.Fatal(err)
		}
		f.Add(bytes.Clone(seeds.Bytes()))
	}
	f.Add([]byte{byte(kindData), 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{byte(kindZero), 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Add([]byte{byte(kindError), 1, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		buf := make([]byte, MaxData)
		r := bytes.NewReader(b)
		for {
			fr, err := readFrame(r, buf)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, errBadFrame) {
					t.Fatalf("unexpected error kind: %v", err)
				}
				return
			}
			checkFrame(t, fr)
		}
	})
}

// checkFrame holds an accepted frame to the bounds and the round trip.
func checkFrame(t *testing.T, fr frame) {
	t.Helper()
	if fr.off < 0 || fr.off >= maxOffset || fr.n < 0 || fr.n >= maxOffset || len(fr.data) > MaxData || len(fr.msg) > maxMessage {
		t.Fatalf("frame out of bounds: kind %d off %d n %d data %d msg %d", fr.kind, fr.off, fr.n, len(fr.data), len(fr.msg))
	}
	var out bytes.Buffer
	if err := writeFrame(&out, fr); err != nil {
		t.Fatalf("an accepted frame does not encode: %v", err)
	}
	again, err := readFrame(&out, make([]byte, MaxData))
	if err != nil {
		t.Fatalf("an accepted frame, encoded, does not read back: %v", err)
	}
	fr.data, again.data = bytes.Clone(fr.data), bytes.Clone(again.data)
	if !reflect.DeepEqual(fr, again) {
		t.Fatalf("round trip changed the frame: %+v, then %+v", fr, again)
	}
}

// FuzzReadRequest: any bytes are a checked request or an error, never a
// crash; an accepted request encodes back to one that reads the same.
func FuzzReadRequest(f *testing.F) {
	for _, s := range []string{
		`{"version":1,"source":"node-a/vg/lv","for":"pvc-1","from":0}`,
		`{"version":1,"source":"node-a/vg/lv","for":"pvc-1","from":1048576}`,
		`{"version":1,"source":"node-a/vg/s2","for":"pvc-1","from":0,"base":"node-a/vg/s1"}`,
		`{"version":1,"source":"node-a/vg/s2","for":"pvc-1","base":"node-b/vg/s1"}`,
		`{"version":1,"source":"node-a/vg/lv","for":"../lv"}`,
		`{"version":2,"source":"node-a/vg/lv"}`,
		`{"version":1,"source":"../../etc/passwd"}`,
		`{"version":1,"source":"a/b/c","from":-1}`,
		`{"version":1,"source":"a/b/c","extra":true}`,
		`{"version":1,"source":"a/b/c"} {}`,
	} {
		f.Add(binary.BigEndian.AppendUint16(nil, uint16(len(s))), []byte(s))
	}
	f.Fuzz(func(t *testing.T, size, body []byte) {
		req, err := readRequest(io.MultiReader(bytes.NewReader(size), bytes.NewReader(body)))
		if err != nil {
			return
		}
		if req.check() != nil {
			t.Fatalf("readRequest accepted a request check refuses: %+v", req)
		}
		var out bytes.Buffer
		if err := writeRequest(&out, req); err != nil {
			t.Fatal(err)
		}
		again, err := readRequest(&out)
		if err != nil || again != req {
			t.Fatalf("round trip: %+v, then %+v (%v)", req, again, err)
		}
	})
}
