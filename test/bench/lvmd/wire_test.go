package lvmd

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
)

// TestCreateLVRequestBytes checks an encoding against bytes derived by
// hand from lvmd.proto: name = 1 and device_class = 4 are strings, tags = 3
// repeated, size_bytes = 6 a varint (256 MiB = 2^28: four 0x80 groups and 0x01).
func TestCreateLVRequestBytes(t *testing.T) {
	got := CreateLVRequest{Name: "v", Tags: []string{"a", "b"}, DeviceClass: "thick", SizeBytes: 256 << 20}.marshal()
	want := []byte{0x0a, 1, 'v', 0x1a, 1, 'a', 0x1a, 1, 'b', 0x22, 5, 't', 'h', 'i', 'c', 'k', 0x30, 0x80, 0x80, 0x80, 0x80, 0x01}
	if !bytes.Equal(got, want) {
		t.Fatalf("CreateLVRequest = % x\nwant               % x", got, want)
	}
	if got := (RemoveLVRequest{Name: "a", DeviceClass: "b"}).marshal(); !bytes.Equal(got, []byte{0x0a, 1, 'a', 0x12, 1, 'b'}) {
		t.Fatalf("RemoveLVRequest = % x", got)
	}
}

// TestSnapshotRequestDecodes decodes a request back field by field.
func TestSnapshotRequestDecodes(t *testing.T) {
	b := CreateLVSnapshotRequest{Name: "s", DeviceClass: "thin", SourceVolume: "o", AccessType: "ro"}.marshal()
	got := map[protowire.Number]string{}
	if err := fields(b, func(num protowire.Number, typ protowire.Type, _ uint64, bs []byte) {
		if typ != protowire.BytesType {
			t.Errorf("field %d: wire type %d", num, typ)
		}
		got[num] = string(bs)
	}); err != nil {
		t.Fatal(err)
	}
	want := map[protowire.Number]string{1: "s", 3: "thin", 4: "o", 6: "ro"}
	if len(got) != len(want) {
		t.Fatalf("fields %v, want %v (size_bytes 0 is left off)", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("field %d = %q, want %q", k, got[k], v)
		}
	}
}

func lvBytes() []byte {
	var lv []byte
	lv = protowire.AppendTag(lv, 1, protowire.BytesType)
	lv = protowire.AppendString(lv, "pvc-1")
	lv = protowire.AppendTag(lv, 3, protowire.VarintType)
	lv = protowire.AppendVarint(lv, 252)
	lv = protowire.AppendTag(lv, 4, protowire.VarintType)
	lv = protowire.AppendVarint(lv, 7)
	lv = protowire.AppendTag(lv, 5, protowire.BytesType) // tags: skipped
	lv = protowire.AppendString(lv, "x")
	lv = protowire.AppendTag(lv, 6, protowire.VarintType)
	lv = protowire.AppendVarint(lv, 256<<20)
	var resp []byte
	resp = protowire.AppendTag(resp, 1, protowire.BytesType)
	return protowire.AppendBytes(resp, lv)
}

func TestVolumeResponse(t *testing.T) {
	lv, err := unmarshalVolumeResponse(lvBytes())
	if err != nil {
		t.Fatal(err)
	}
	if lv != (LogicalVolume{Name: "pvc-1", DevMajor: 252, DevMinor: 7, SizeBytes: 256 << 20}) {
		t.Fatalf("decoded %+v", lv)
	}
	if _, err := unmarshalVolumeResponse(nil); err == nil {
		t.Fatal("a response without a volume decoded")
	}
	if _, err := unmarshalVolumeResponse([]byte{0x0a, 5, 1}); err == nil {
		t.Fatal("a truncated response decoded")
	}
}

// TestOverGRPC runs the client against a gRPC server on a unix socket that
// answers with the same raw codec: method names and bytes cross as sent.
func TestOverGRPC(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "lvmd.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string][]byte{}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(func(_ any, st grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(st)
		var req []byte
		if err := st.RecvMsg(&req); err != nil {
			return err
		}
		seen[method] = req
		switch method {
		case methodCreateLV:
			return st.SendMsg(lvBytes())
		case methodGetFreeBytes:
			return st.SendMsg(protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1<<30))
		}
		return st.SendMsg([]byte{})
	}))
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	c, err := Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	ctx := context.Background()
	lv, err := c.CreateLV(ctx, CreateLVRequest{Name: "pvc-1", DeviceClass: "thick", SizeBytes: 1})
	if err != nil || lv.Name != "pvc-1" {
		t.Fatalf("CreateLV: %+v %v", lv, err)
	}
	if err := c.RemoveLV(ctx, RemoveLVRequest{Name: "pvc-1"}); err != nil {
		t.Fatal(err)
	}
	if free, err := c.GetFreeBytes(ctx, "thick"); err != nil || free != 1<<30 {
		t.Fatalf("GetFreeBytes: %d %v", free, err)
	}
	if !bytes.Equal(seen[methodRemoveLV], []byte{0x0a, 5, 'p', 'v', 'c', '-', '1'}) {
		t.Fatalf("RemoveLV sent % x", seen[methodRemoveLV])
	}
}
