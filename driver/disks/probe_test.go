package disks

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"carve.dev/carve/lvm/runner"
	"carve.dev/carve/test/loopdev"
)

// Outputs of util-linux 2.38's `blkid -p -o export`.
const (
	blkidExt4 = "DEVNAME=/dev/sdb\nUUID=77ee535f-f47c-42bf-95c6-23ef72b5ccd2\nVERSION=1.0\nBLOCK_SIZE=4096\nTYPE=ext4\nUSAGE=filesystem\n"
	blkidGPT  = "DEVNAME=/dev/sdc\nPTUUID=1f8a9c2e-5b1d-4f7a-9d36-0c2f4e1b7a55\nPTTYPE=gpt\n"
	blkidLVM  = "DEVNAME=/dev/sdd\nUUID=Hd3cQ1-mX0e-2fPq-Zk8B-4sRt-Yw7u-Lm9Nop\nVERSION=LVM2 001\nTYPE=LVM2_member\nUSAGE=raid\n"
	blkidSwap = "DEVNAME=/dev/sde\nUUID=682ffd2c-a32f-41c7-a09d-532114416cb9\nVERSION=1\nTYPE=swap\nUSAGE=other\n"
	blkidMD   = "DEVNAME=/dev/sdf\nUUID=3c1f0d5e-8a2b-4c6d-9e0f-1a2b3c4d5e6f\nUUID_SUB=0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d\nLABEL=host:0\nVERSION=1.2\nTYPE=linux_raid_member\nUSAGE=raid\n"
	blkidLUKS = "DEVNAME=/dev/sdg\nUUID=9b2f6c1e-3d4a-4e5b-8f7c-6a1d2e3f4b5c\nLABEL=\nVERSION=2\nTYPE=crypto_LUKS\nUSAGE=crypto\n"
	// A label with a blank and a '$', as blkid escapes them.
	blkidLabel = "DEVNAME=e.img\nLABEL=my\\ disk\\$\nUUID=77ee535f\nTYPE=ext4\nUSAGE=filesystem\n"
)

func TestParseBlkid(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Signatures
	}{
		{"ext4", blkidExt4, Signatures{Type: "ext4", Usage: "filesystem", UUID: "77ee535f-f47c-42bf-95c6-23ef72b5ccd2"}},
		{"gpt", blkidGPT, Signatures{PTType: "gpt"}},
		{"LVM2 PV", blkidLVM, Signatures{Type: "LVM2_member", Usage: "raid", UUID: "Hd3cQ1-mX0e-2fPq-Zk8B-4sRt-Yw7u-Lm9Nop"}},
		{"swap", blkidSwap, Signatures{Type: "swap", Usage: "other", UUID: "682ffd2c-a32f-41c7-a09d-532114416cb9"}},
		{"md member", blkidMD, Signatures{Type: "linux_raid_member", Usage: "raid", UUID: "3c1f0d5e-8a2b-4c6d-9e0f-1a2b3c4d5e6f", Label: "host:0"}},
		{"LUKS", blkidLUKS, Signatures{Type: "crypto_LUKS", Usage: "crypto", UUID: "9b2f6c1e-3d4a-4e5b-8f7c-6a1d2e3f4b5c"}},
		{"escaped label", blkidLabel, Signatures{Type: "ext4", Usage: "filesystem", UUID: "77ee535f", Label: "my disk$"}},
		{"nothing", "", Signatures{}},
		{"no trailing newline", "TYPE=xfs", Signatures{Type: "xfs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseBlkid([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			if got.Blank() != (tc.in == "") {
				t.Fatalf("Blank() = %t", got.Blank())
			}
		})
	}
	for _, bad := range []string{"TYPE", "TYPE=ext4\nno equals sign\n", "=x", "type=ext4", "TY PE=x"} {
		if s, err := ParseBlkid([]byte(bad)); err == nil {
			t.Errorf("%q: accepted as %+v", bad, s)
		}
	}
}

// fakeRun answers every command with out and err, and records the
// command lines.
type fakeRun struct {
	out   string
	err   error
	calls []string
}

func (f *fakeRun) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	f.calls = append(f.calls, runner.CommandLine(name, args))
	return []byte(f.out), f.err
}

func exitError(code int) error {
	return &runner.Error{Name: "blkid", ExitCode: code, Stderr: "what blkid said", Err: errors.New("exit status")}
}

func TestProbeExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		run     fakeRun
		want    Signatures
		wantErr string
	}{
		{"found", fakeRun{out: blkidExt4}, Signatures{Type: "ext4", Usage: "filesystem", UUID: "77ee535f-f47c-42bf-95c6-23ef72b5ccd2"}, ""},
		{"nothing found", fakeRun{err: exitError(2)}, Signatures{}, ""},
		{"ambivalent", fakeRun{err: exitError(8)}, Signatures{Ambivalent: true}, ""},
		{"usage error", fakeRun{err: exitError(4)}, Signatures{}, "probe /dev/sdx: blkid: exit status: what blkid said"},
		{"did not start", fakeRun{err: &runner.Error{Name: "blkid", ExitCode: -1, Err: exec.ErrNotFound}}, Signatures{}, "probe /dev/sdx: blkid: executable file not found"},
		{"other error", fakeRun{err: context.DeadlineExceeded}, Signatures{}, "probe /dev/sdx: context deadline exceeded"},
		{"found but unnamed", fakeRun{out: "DEVNAME=/dev/sdx\nPTUUID=abc\n"}, Signatures{}, "blkid found something but named no type"},
		{"garbage", fakeRun{out: "garbage\n"}, Signatures{}, `probe /dev/sdx: blkid output line "garbage" is not KEY=VALUE`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := probe(context.Background(), &tc.run, "/dev/sdx")
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			if want := []string{"blkid -p -o export /dev/sdx"}; !slices.Equal(tc.run.calls, want) {
				t.Fatalf("ran %v, want %v", tc.run.calls, want)
			}
		})
	}
}

// TestProbeNeedsABlockDevice: a missing path, a file or a character
// device is refused before blkid, whose "nothing found" would read as
// blank.
func TestProbeNeedsABlockDevice(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dev := range []string{filepath.Join(t.TempDir(), "none"), file, "/dev/null"} {
		run := &fakeRun{err: exitError(2)}
		if s, err := Probe(context.Background(), run, dev); err == nil {
			t.Errorf("%s: probed as %+v", dev, s)
		}
		if len(run.calls) > 0 {
			t.Errorf("%s: ran %v", dev, run.calls)
		}
	}
}

// TestProbeRealBlkid runs the real blkid on a loop device: blank, then
// after mkfs.ext4.
func TestProbeRealBlkid(t *testing.T) {
	for _, tool := range []string{"blkid", "mkfs.ext4"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: %s not installed (apt: util-linux, e2fsprogs)", tool)
		}
	}
	dev, _ := loopdev.New(t, 64<<20)
	run := runner.New(0)
	s, err := Probe(context.Background(), run, dev)
	if err != nil || !s.Blank() {
		t.Fatalf("blank loop device: %+v, %v", s, err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-L", "carve test", dev).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	s, err = Probe(context.Background(), run, dev)
	want := Signatures{Type: "ext4", Usage: "filesystem", UUID: s.UUID, Label: "carve test"}
	if err != nil || s != want || s.UUID == "" {
		t.Fatalf("ext4 loop device: %+v, %v; want %+v with a UUID", s, err, want)
	}
}

func TestParseBlkidKeepsOnlyItsKeys(t *testing.T) {
	s, err := ParseBlkid([]byte("PART_ENTRY_UUID=x\nSBBADCSUM=1\nTYPE=xfs\n"))
	if err != nil || !reflect.DeepEqual(s, Signatures{Type: "xfs"}) {
		t.Fatalf("%+v, %v", s, err)
	}
}
