// Package lvmd is a small client of TopoLVM's lvmd, the node daemon that
// runs lvm2 for TopoLVM, for the VM benchmark's side-by-side section
// (test/bench, section lvmd). It speaks gRPC over lvmd's unix socket with
// a codec that passes bytes through, and encodes the few messages it needs
// by hand with protowire: TopoLVM's generated code is not imported.
//
// The messages and their field numbers are those of
// pkg/lvmd/proto/lvmd.proto in TopoLVM, commit 83e3dcee2fd7 (chart
// v17.1.0); proto3 leaves zero values off the wire.
package lvmd

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// The gRPC methods used, /package.Service/Method.
const (
	methodCreateLV         = "/proto.LVService/CreateLV"
	methodRemoveLV         = "/proto.LVService/RemoveLV"
	methodCreateLVSnapshot = "/proto.LVService/CreateLVSnapshot"
	methodGetFreeBytes     = "/proto.VGService/GetFreeBytes"
)

// CreateLVRequest: name = 1, tags = 3, device_class = 4,
// lvcreate_option_class = 5, size_bytes = 6.
type CreateLVRequest struct {
	Name        string
	Tags        []string
	DeviceClass string
	SizeBytes   int64
}

func (r CreateLVRequest) marshal() []byte {
	b := appendString(nil, 1, r.Name)
	for _, t := range r.Tags {
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendString(b, t)
	}
	b = appendString(b, 4, r.DeviceClass)
	return appendVarint(b, 6, uint64(r.SizeBytes))
}

// RemoveLVRequest: name = 1, device_class = 2.
type RemoveLVRequest struct {
	Name        string
	DeviceClass string
}

func (r RemoveLVRequest) marshal() []byte {
	return appendString(appendString(nil, 1, r.Name), 2, r.DeviceClass)
}

// CreateLVSnapshotRequest: name = 1, tags = 2, device_class = 3,
// source_volume = 4, access_type = 6 ("ro" or "rw"), size_bytes = 7 (0:
// the source's size).
type CreateLVSnapshotRequest struct {
	Name         string
	DeviceClass  string
	SourceVolume string
	AccessType   string
	SizeBytes    int64
}

func (r CreateLVSnapshotRequest) marshal() []byte {
	b := appendString(nil, 1, r.Name)
	b = appendString(b, 3, r.DeviceClass)
	b = appendString(b, 4, r.SourceVolume)
	b = appendString(b, 6, r.AccessType)
	return appendVarint(b, 7, uint64(r.SizeBytes))
}

// LogicalVolume: name = 1, dev_major = 3, dev_minor = 4, tags = 5,
// size_bytes = 6, path = 7, attr = 8. CreateLVResponse and
// CreateLVSnapshotResponse hold one as field 1.
type LogicalVolume struct {
	Name               string
	DevMajor, DevMinor uint32
	SizeBytes          int64
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// fields walks a message's fields, calling fn with each field's number,
// type and value (a varint's value, or a bytes field's bytes); other wire
// types are skipped.
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, v uint64, bs []byte)) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("lvmd message: %w", protowire.ParseError(n))
		}
		b = b[n:]
		switch typ {
		case protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return fmt.Errorf("lvmd message field %d: %w", num, protowire.ParseError(m))
			}
			fn(num, typ, v, nil)
			n = m
		case protowire.BytesType:
			bs, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return fmt.Errorf("lvmd message field %d: %w", num, protowire.ParseError(m))
			}
			fn(num, typ, 0, bs)
			n = m
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("lvmd message field %d: %w", num, protowire.ParseError(n))
			}
		}
		b = b[n:]
	}
	return nil
}

func unmarshalLV(b []byte) (LogicalVolume, error) {
	var lv LogicalVolume
	err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, bs []byte) {
		switch {
		case num == 1 && typ == protowire.BytesType:
			lv.Name = string(bs)
		case num == 3 && typ == protowire.VarintType:
			lv.DevMajor = uint32(v)
		case num == 4 && typ == protowire.VarintType:
			lv.DevMinor = uint32(v)
		case num == 6 && typ == protowire.VarintType:
			lv.SizeBytes = int64(v)
		}
	})
	return lv, err
}

// unmarshalVolumeResponse reads CreateLVResponse or
// CreateLVSnapshotResponse: the volume in field 1.
func unmarshalVolumeResponse(b []byte) (LogicalVolume, error) {
	var inner []byte
	found := false
	if err := fields(b, func(num protowire.Number, typ protowire.Type, _ uint64, bs []byte) {
		if num == 1 && typ == protowire.BytesType {
			inner, found = bs, true
		}
	}); err != nil {
		return LogicalVolume{}, err
	}
	if !found {
		return LogicalVolume{}, fmt.Errorf("lvmd response has no volume")
	}
	return unmarshalLV(inner)
}

// unmarshalFreeBytes reads GetFreeBytesResponse: free_bytes = 1.
func unmarshalFreeBytes(b []byte) (uint64, error) {
	var free uint64
	err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, _ []byte) {
		if num == 1 && typ == protowire.VarintType {
			free = v
		}
	})
	return free, err
}
