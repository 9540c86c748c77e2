package lvm

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// thinPoolStatus is a thin pool's status as a 6.x kernel prints it: 11 of
// 4096 metadata blocks and 0 of 4096 data blocks used, read-write.
const thinPoolStatus = "1 11/4096 0/4096 - rw discard_passdown queue_if_no_space - 1024"

// dmReply is a DM_TABLE_STATUS reply as the kernel writes it
// (drivers/md/dm-ioctl.c, retrieve_status): the kernel's version, data at
// 312, one spec per target with its status string, each next spec 8-byte
// aligned and its offset counted from the first, data_size where the last
// string ends. The buffer ends there too (the kernel's is larger: the
// caller's size).
func dmReply(name, uuid string, targets ...dmTarget) []byte {
	ne := binary.NativeEndian
	data := []byte{}
	for i, t := range targets {
		at := len(data)
		data = append(data, make([]byte, dmTargetSpecSize)...)
		ne.PutUint64(data[at:], t.start)
		ne.PutUint64(data[at+8:], t.length)
		copy(data[at+24:at+24+dmTypeLen], t.kind)
		data = append(append(data, t.status...), 0)
		next := (len(data) + 7) / 8 * 8
		ne.PutUint32(data[at+20:], uint32(next))
		if i+1 < len(targets) {
			data = append(data, make([]byte, next-len(data))...)
		}
	}
	b := make([]byte, dmIoctlSize, dmIoctlSize+len(data))
	for i, v := range []uint32{4, 48, 0} {
		ne.PutUint32(b[4*i:], v)
	}
	ne.PutUint32(b[12:], uint32(dmIoctlSize+len(data)))
	ne.PutUint32(b[16:], dmIoctlSize)
	ne.PutUint32(b[20:], uint32(len(targets)))
	ne.PutUint32(b[24:], 1)                       // open_count
	ne.PutUint32(b[28:], dmNoFlushFlag|1<<5|1<<2) // as asked, + active present, exists
	ne.PutUint64(b[40:], 252<<8|3)                // dev 252:3
	copy(b[48:48+dmNameLen], name)                // name
	copy(b[48+dmNameLen:48+dmNameLen+129], uuid)  // uuid
	return append(b, data...)
}

var tpoolReply = dmReply("carve--thin-pool0-tpool",
	"LVM-Wn3X0fbt4cR1wLpqv5ce5l4Cx1ytjzLzqfhQ2mHv1KcX8n5Y0Q2g3Jq1dZ0kYb8A-tpool",
	dmTarget{0, 524288, "thin-pool", thinPoolStatus})

func TestParseDMStatusReadsTheKernelsReply(t *testing.T) {
	got, err := parseDMStatus(append(tpoolReply, make([]byte, 1024)...)) // the rest of the caller's buffer
	want := []dmTarget{{0, 524288, "thin-pool", thinPoolStatus}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("thin pool: %+v, %v; want %+v", got, err, want)
	}
	// Two linear segments: a linear target's status is empty.
	segs := []dmTarget{{0, 8192, "linear", ""}, {8192, 4096, "linear", ""}}
	got, err = parseDMStatus(dmReply("carve--linear-vol1", "LVM-x", segs...))
	if err != nil || !reflect.DeepEqual(got, segs) {
		t.Errorf("two segments: %+v, %v; want %+v", got, err, segs)
	}
	// A device with no live table (created, never loaded) has no targets.
	if got, err := parseDMStatus(dmReply("carve--thin-new", "")); err != nil || len(got) != 0 {
		t.Errorf("no table: %+v, %v", got, err)
	}
}

func TestParseDMStatusRefusesDamagedReplies(t *testing.T) {
	ne := binary.NativeEndian
	damage := map[string]func(b []byte) []byte{
		"short":                  func(b []byte) []byte { return b[:dmIoctlSize-1] },
		"version 3":              func(b []byte) []byte { ne.PutUint32(b[0:], 3); return b },
		"data past the end":      func(b []byte) []byte { ne.PutUint32(b[12:], uint32(len(b)+8)); return b },
		"data before the header": func(b []byte) []byte { ne.PutUint32(b[16:], 8); return b },
		"status without its NUL": func(b []byte) []byte {
			b = b[:len(b)-1]
			ne.PutUint32(b[12:], uint32(len(b)))
			return b
		},
		"more targets than room": func(b []byte) []byte { ne.PutUint32(b[20:], 1000); return b },
		"next going backwards": func(b []byte) []byte {
			ne.PutUint32(b[20:], 2)
			ne.PutUint32(b[dmIoctlSize+20:], 0)
			return b
		},
	}
	for name, f := range damage {
		b := f(append([]byte(nil), tpoolReply...))
		if got, err := parseDMStatus(b); err == nil {
			t.Errorf("%s: parsed %+v", name, got)
		}
	}
	full := append([]byte(nil), tpoolReply...)
	ne.PutUint32(full[28:], ne.Uint32(full[28:])|dmBufferFullFlag)
	if _, err := parseDMStatus(full); !errors.Is(err, errDMBufferFull) {
		t.Errorf("buffer full: %v, want errDMBufferFull (ask again with more room)", err)
	}
}

func TestDMStatusRequestNamesTheDevice(t *testing.T) {
	b, err := dmStatusRequest("carve--thin-pool0-tpool", dmStatusBuffer)
	if err != nil {
		t.Fatal(err)
	}
	ne := binary.NativeEndian
	if ne.Uint32(b[0:]) != 4 || ne.Uint32(b[12:]) != dmStatusBuffer || ne.Uint32(b[16:]) != dmIoctlSize ||
		ne.Uint32(b[28:]) != dmNoFlushFlag || !strings.HasPrefix(string(b[48:]), "carve--thin-pool0-tpool\x00") {
		t.Errorf("request header %x", b[:80])
	}
	for _, bad := range []string{"", strings.Repeat("a", dmNameLen), "a\x00b"} {
		if _, err := dmStatusRequest(bad, dmStatusBuffer); err == nil {
			t.Errorf("a request for %q", bad)
		}
	}
}

func TestParseThinPoolUsage(t *testing.T) {
	for status, want := range map[string]string{
		thinPoolStatus: "data 0/4096 meta 11/4096 rw",
		"7 120/4096 4096/4096 - out_of_data_space discard_passdown queue_if_no_space - 1024": "data 4096/4096 meta 120/4096 out_of_data_space",
		"3 90/4096 17/4096 88 ro no_discard_passdown error_if_no_space needs_check 1024":     "data 17/4096 meta 90/4096 ro needs_check",
		"2 11/4096 5/8192 - rw": "data 5/8192 meta 11/4096 rw", // an older kernel's: nothing after the mode
		"Fail":                  "Fail",
		"Error\n":               "Error",
	} {
		u, err := parseThinPoolUsage(status)
		if err != nil || u.String() != want {
			t.Errorf("%q: %q, %v; want %q", status, u, err, want)
		}
	}
	for _, bad := range []string{"", "Fail now", "1 11/4096 0/4096 -", "x 11/4096 0/4096 - rw", "1 11 0/4096 - rw",
		"1 11/4096 5000/4096 - rw", "1 0/0 0/0 - rw", "1 11/4096 0/4096 x rw", "1 11/4096 0/4096 - sleepy"} {
		if u, err := parseThinPoolUsage(bad); err == nil {
			t.Errorf("%q read as %+v", bad, u)
		}
	}
}

// FuzzDMStatus: any reply bytes and any status line may be refused, never
// panic; what is accepted holds together.
func FuzzDMStatus(f *testing.F) {
	f.Add(tpoolReply, thinPoolStatus)
	f.Add(dmReply("vg-lv", "", dmTarget{0, 8, "linear", ""}, dmTarget{8, 8, "striped", "2 252:1 252:2 1 AA"}), "Fail")
	f.Add(make([]byte, dmIoctlSize), "1 11/4096 0/4096 - rw")
	f.Fuzz(func(t *testing.T, reply []byte, status string) {
		if targets, err := parseDMStatus(reply); err == nil {
			if len(targets) > len(reply)/dmTargetSpecSize {
				t.Errorf("%d targets from %d bytes", len(targets), len(reply))
			}
			for _, x := range targets {
				if len(x.kind) >= dmTypeLen || strings.Contains(x.kind+x.status, "\x00") {
					t.Errorf("target %+v", x)
				}
			}
		}
		if u, err := parseThinPoolUsage(status); err == nil {
			failed := u.mode == "Fail" || u.mode == "Error"
			if u.dataUsed > u.dataTotal || u.metaUsed > u.metaTotal || (u.dataTotal == 0) != failed || u.String() == "" {
				t.Errorf("%q read as %+v", status, u)
			}
		}
	})
}

// Where this kernel's device-mapper can be asked (root, as the node
// plugin runs), the request is one it reads: a name with no device is
// ENXIO, not the EINVAL or ENOTTY of a malformed one. The VM suite reads
// real thin pools (lvm_vm_cache_test.go).
func TestDMTableStatusIsAnIoctlTheKernelReads(t *testing.T) {
	ctl, err := unix.Open(dmControl, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("device-mapper not here: %v", err)
	}
	defer func() { _ = unix.Close(ctl) }()
	_, err = dmTableStatus(ctl, "carve--unit-no--such--device")
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
		t.Skipf("device-mapper refuses this process: %v", err)
	}
	if !errors.Is(err, unix.ENXIO) {
		t.Errorf("status of no device: %v, want ENXIO", err)
	}
}
