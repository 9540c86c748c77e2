package nodefs

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"

	"carve.dev/carve/driver/volume"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
	utilexec "k8s.io/utils/exec"
	testingexec "k8s.io/utils/exec/testing"
)

// fakeBlkid returns an exec whose every command is blkid answering with
// out and exit code (0: found, 2: nothing found, other: failure), and
// which fails the test if anything else (mkfs!) is run.
func fakeBlkid(t *testing.T, out string, exit int) *testingexec.FakeExec {
	t.Helper()
	script := func(cmd string, args ...string) utilexec.Cmd {
		if cmd != "blkid" {
			t.Errorf("unexpected command %s %v", cmd, args)
		}
		fc := &testingexec.FakeCmd{CombinedOutputScript: []testingexec.FakeAction{
			func() ([]byte, []byte, error) {
				if exit != 0 {
					return []byte(out), nil, testingexec.FakeExitError{Status: exit}
				}
				return []byte(out), nil, nil
			},
		}}
		return testingexec.InitFakeCmd(fc, cmd, args...)
	}
	return &testingexec.FakeExec{CommandScript: []testingexec.FakeCommandAction{script, script}}
}

func TestFilesystemTypeParsesBlkid(t *testing.T) {
	dev := anyBlockDevice(t)
	cases := []struct {
		name, out string
		exit      int
		want      string
		wantErr   bool
	}{
		{"ext4", "DEVNAME=" + dev + "\nTYPE=ext4\n", 0, "ext4", false},
		{"xfs", "TYPE=xfs\n", 0, "xfs", false},
		{"blank", "", 2, "", false},
		{"partition table", "PTTYPE=dos\n", 0, "unknown data, probably partitions", false},
		{"ambivalent probe", "", 8, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := New(fakeBlkid(t, tc.out, tc.exit))
			got, err := m.FilesystemType(context.Background(), dev)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("FilesystemType = %q, %v; want %q, error=%t", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestFilesystemTypeMissingDeviceIsNotBlank(t *testing.T) {
	// blkid exits 2 for a missing path too, which mount-utils reads as blank.
	m := New(fakeBlkid(t, "", 2))
	_, err := m.FilesystemType(context.Background(), filepath.Join(t.TempDir(), "nope"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want ErrNotExist", err)
	}
}

func TestFormatAndMountRefusesForeignSignatureWithoutMkfs(t *testing.T) {
	dev := anyBlockDevice(t)
	for _, tc := range []struct{ blkid, fsType string }{
		{"TYPE=xfs\n", "ext4"},
		{"TYPE=ext4\n", "xfs"},
		{"TYPE=ext3\n", ""},
		{"TYPE=LVM2_member\n", "ext4"},
		{"PTTYPE=gpt\n", "ext4"},
	} {
		m := New(fakeBlkid(t, tc.blkid, 0)) // fails the test if mkfs runs
		target := filepath.Join(t.TempDir(), "staging")
		_, err := m.FormatAndMount(context.Background(), dev, target, tc.fsType, MkfsOptions{}, nil)
		if !errors.Is(err, volume.ErrFilesystemMismatch) {
			t.Errorf("blkid %q as %q: err = %v, want volume.ErrFilesystemMismatch", tc.blkid, tc.fsType, err)
		}
	}
}

func TestFormatAndMountRejectsBadInput(t *testing.T) {
	m := New(fakeBlkid(t, "", 2))
	dir := t.TempDir()
	if _, err := m.FormatAndMount(context.Background(), anyBlockDevice(t), dir, "ntfs", MkfsOptions{}, nil); err == nil ||
		!strings.Contains(err.Error(), "unsupported filesystem type") {
		t.Errorf("ntfs: err = %v", err)
	}
	_, err := m.FormatAndMount(context.Background(), filepath.Join(dir, "missing"), dir, "ext4", MkfsOptions{}, nil)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing device: err = %v, want ErrNotExist", err)
	}
	if _, err := m.FormatAndMount(context.Background(), "/dev/null", dir, "", MkfsOptions{}, nil); err == nil ||
		!strings.Contains(err.Error(), "not a block device") {
		t.Errorf("char device: err = %v", err)
	}
}

func TestNormalizeFSType(t *testing.T) {
	for in, want := range map[string]string{"": "ext4", "ext4": "ext4", "xfs": "xfs"} {
		if got, err := normalizeFSType(in); err != nil || got != want {
			t.Errorf("normalizeFSType(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"ntfs", "ext2", "EXT4"} {
		if _, err := normalizeFSType(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	// btrfs is there exactly when its mkfs is.
	_, lookErr := exec.LookPath("mkfs.btrfs")
	got, err := normalizeFSType("btrfs")
	if (lookErr == nil) != (err == nil) || (err != nil && !errors.Is(err, volume.ErrToolMissing)) {
		t.Errorf("normalizeFSType(btrfs) = %q, %v with mkfs.btrfs lookup error %v", got, err, lookErr)
	}
}

// ctxRecorder runs no command: it notes, per command line, the context its
// first run was made with (nil: Command, no context) and, when it ran, whether that
// context had ended and had a deadline. blkid answers TYPE=ext4, blockdev
// 0 (read-write), anything else succeeds silently.
type ctxRecorder struct {
	testingexec.FakeExec
	mu  sync.Mutex
	ran map[string]ranWith
}

type ranWith struct {
	ctx         context.Context
	ended       bool
	hasDeadline bool
}

func newCtxRecorder() *ctxRecorder { return &ctxRecorder{ran: map[string]ranWith{}} }

func (r *ctxRecorder) Command(name string, args ...string) utilexec.Cmd {
	return r.CommandContext(nil, name, args...) //nolint:staticcheck // nil: made without a context
}

func (r *ctxRecorder) CommandContext(ctx context.Context, name string, args ...string) utilexec.Cmd {
	line := strings.Join(append([]string{name}, args...), " ")
	return &testingexec.FakeCmd{CombinedOutputScript: []testingexec.FakeAction{func() ([]byte, []byte, error) {
		w := ranWith{ctx: ctx}
		if ctx != nil {
			_, w.hasDeadline = ctx.Deadline()
			w.ended = ctx.Err() != nil
		}
		r.mu.Lock()
		if _, seen := r.ran[line]; !seen {
			r.ran[line] = w
		}
		r.mu.Unlock()
		switch name {
		case "blkid":
			return []byte("TYPE=ext4\n"), nil, nil
		case "blockdev":
			return []byte("0\n"), nil, nil // --getro: read-write
		}
		return nil, nil, nil
	}}}
}

// lines returns the command lines that ran, starting with prefix.
func (r *ctxRecorder) lines(prefix string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for l := range r.ran {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// Each command's class is given where it is written: probes are bound to
// the caller's context (and the metadata timeout); data work (mkfs, fsck,
// resize) to a context of its own, which the caller's cancellation does
// not end and whose deadline is sized for the device.
func TestExecGivesEachCommandItsClass(t *testing.T) {
	dev := anyBlockDevice(t)
	rec := newCtxRecorder()
	m := New(rec)
	ctx, cancel := context.WithCancel(context.Background())
	if got, err := m.FilesystemType(ctx, dev); err != nil || got != "ext4" {
		t.Fatalf("FilesystemType = %q, %v", got, err)
	}
	if need, err := m.NeedsResize(ctx, dev, t.TempDir()); err != nil || !need {
		t.Fatalf("NeedsResize = %t, %v", need, err)
	}
	cancel() // data work goes on regardless
	must(t, m.format(ctx, dev, "ext4", MkfsOptions{}))
	must(t, m.fsck(ctx, dev))
	must(t, m.ResizeFS(context.WithoutCancel(ctx), dev, t.TempDir()))

	for _, prefix := range []string{"blkid", "blockdev"} {
		lines := rec.lines(prefix)
		if len(lines) == 0 {
			t.Errorf("no %s ran", prefix)
		}
		for _, l := range lines {
			if rec.ran[l].ctx != ctx {
				t.Errorf("%s: not bound to the caller's context", l)
			}
		}
	}
	for _, prefix := range []string{"mkfs.ext4", "fsck -a", "resize2fs"} {
		lines := rec.lines(prefix)
		if len(lines) != 1 {
			t.Errorf("%s ran %d times, want once", prefix, len(lines))
			continue
		}
		w := rec.ran[lines[0]]
		if w.ctx == nil || w.ctx == ctx || !w.hasDeadline || w.ended {
			t.Errorf("%s: ran with %+v, want the data context: its own deadline, not ended with the caller's", lines[0], w)
		}
	}
}

func TestFormattingIsLoggedAtLevelZero(t *testing.T) {
	var buf bytes.Buffer
	captureKlog(t, &buf)
	dev := anyBlockDevice(t)
	m := New(newCtxRecorder())
	if err := m.format(context.Background(), dev, "xfs", MkfsOptions{}); err != nil {
		t.Fatal(err)
	}
	klog.Flush()
	for _, want := range []string{`"formatting" device="` + dev + `" fsType="xfs" args=["-f","` + dev + `"]`, `"formatted" device="` + dev + `" fsType="xfs"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, buf.String())
		}
	}
}

// captureKlog sends klog output at verbosity 0 to buf for this test.
func captureKlog(t *testing.T, buf *bytes.Buffer) {
	fset := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fset)
	for k, v := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "v": "0"} {
		if err := fset.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	klog.SetOutput(buf)
	t.Cleanup(func() {
		klog.SetOutput(os.Stderr)
		_ = fset.Set("logtostderr", "true")
	})
}

func TestWaitForDevice(t *testing.T) {
	m := New(nil)
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	_, err := m.WaitForDevice(ctx, missing)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing: err = %v", err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel2()
	if _, err := m.WaitForDevice(ctx2, "/dev/null"); err == nil || !strings.Contains(err.Error(), "not a block device") {
		t.Errorf("char device: err = %v", err)
	}
}

func TestWaitForDeviceSeesLateSymlink(t *testing.T) {
	dev := anyBlockDevice(t)
	link := filepath.Join(t.TempDir(), "lv")
	go func() {
		time.Sleep(300 * time.Millisecond)
		_ = os.Symlink(dev, link)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := New(nil).WaitForDevice(ctx, link); err != nil {
		t.Fatal(err)
	}
}

func TestTopOfStack(t *testing.T) {
	const table = "1 0 8:1 / / rw - ext4 /dev/root rw\n" +
		"2 1 7:1 / /mnt/my\\040vol rw - ext4 /dev/loop1 rw\n" +
		"3 1 7:2 /sub\\040dir /mnt/my\\040vol rw - ext4 /dev/loop2 rw\n"
	top := func(point string) (*mountinfo.Info, error) {
		infos, err := mountinfo.GetMountsFromReader(strings.NewReader(table), at(point))
		if err != nil {
			t.Fatal(err)
		}
		return topOf(infos, point)
	}
	mi, err := top("/mnt/my vol")
	if err != nil || mi.ID != 3 || mi.Source != "/dev/loop2" || mi.Root != "/sub dir" {
		t.Errorf("top of /mnt/my vol = %+v, %v", mi, err)
	}
	if _, err := top("/mnt"); !errors.Is(err, ErrNotMounted) {
		t.Errorf("not mounted: err = %v", err)
	}
}

func TestStatsFromStatfs(t *testing.T) {
	st := unix.Statfs_t{Bsize: 4096, Frsize: 1024, Blocks: 1000, Bfree: 300, Bavail: 250, Files: 64, Ffree: 60}
	want := Stats{TotalBytes: 1024000, AvailableBytes: 256000, UsedBytes: 716800, TotalInodes: 64, FreeInodes: 60, UsedInodes: 4}
	if got := statsFromStatfs(&st); got != want {
		t.Errorf("frsize: got %+v, want %+v", got, want)
	}
	st.Frsize = 0
	if got := statsFromStatfs(&st); got.TotalBytes != 4096000 {
		t.Errorf("bsize fallback: TotalBytes = %d", got.TotalBytes)
	}
}

func TestPathStatsAndBlockSizeErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := PathStats(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("PathStats missing: %v", err)
	}
	if s, err := PathStats(dir); err != nil || s.TotalBytes <= 0 {
		t.Errorf("PathStats(tempdir) = %+v, %v", s, err)
	}
	file := filepath.Join(dir, "f")
	writeFile(t, file, "x")
	if _, err := BlockSize(file); err == nil || !strings.Contains(err.Error(), "not a block device") {
		t.Errorf("BlockSize(regular file): %v", err)
	}
}

func TestIsMountPointAndDeviceOfMountMissing(t *testing.T) {
	m := New(nil)
	missing := filepath.Join(t.TempDir(), "missing")
	if ok, err := m.IsMountPoint(missing); ok || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("IsMountPoint(missing) = %t, %v", ok, err)
	}
	if ok, err := m.IsMountPoint(t.TempDir()); ok || err != nil {
		t.Errorf("IsMountPoint(plain dir) = %t, %v", ok, err)
	}
	if _, err := deviceOfMount(t.TempDir()); !errors.Is(err, ErrNotMounted) {
		t.Errorf("DeviceOfMount(plain dir): %v", err)
	}
	if _, err := deviceOfMount(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("DeviceOfMount(missing): %v", err)
	}
}

func TestUnmountPlainPaths(t *testing.T) {
	m := New(nil)
	dir := t.TempDir()
	if err := m.Unmount(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("missing: %v", err)
	}
	empty := filepath.Join(dir, "empty")
	file := filepath.Join(dir, "file")
	if err := os.Mkdir(empty, 0o750); err != nil {
		t.Fatal(err)
	}
	writeFile(t, file, "")
	for _, p := range []string{empty, file} {
		if err := m.Unmount(p); err != nil {
			t.Errorf("Unmount(%s): %v", p, err)
		}
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s not removed: %v", p, err)
		}
	}
	full := filepath.Join(dir, "full")
	if err := os.Mkdir(full, 0o750); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(full, "data"), "keep")
	if err := m.Unmount(full); err == nil {
		t.Error("non-empty unmounted dir removed without error")
	}
	if readFile(t, filepath.Join(full, "data")) != "keep" {
		t.Error("data lost")
	}
}

func TestSameDevice(t *testing.T) {
	dev := anyBlockDevice(t)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dev, link); err != nil {
		t.Fatal(err)
	}
	if same, err := sameDevice(dev, link); err != nil || !same {
		t.Errorf("sameDevice(dev, link) = %t, %v", same, err)
	}
	if _, err := sameDevice(dev, "/dev/null"); err == nil {
		t.Error("char device accepted")
	}
}

// An unsupported filesystem is the caller's error (INVALID_ARGUMENT), not
// an internal one.
func TestUnsupportedFilesystemIsInvalidArgument(t *testing.T) {
	_, err := normalizeFSType("zfs")
	if got := volume.CodeOf(err); !errors.Is(err, volume.ErrUnsupportedFilesystem) || got != codes.InvalidArgument {
		t.Errorf("normalizeFSType(zfs) = %v (%v), want ErrUnsupportedFilesystem, InvalidArgument", err, got)
	}
}

// FuzzCheckMountFlags: an accepted flag list names only allowlisted flags
// whose values hold no separator, space, quote or path (but for an SELinux
// label, whose commas sit inside double quotes), so that mount(8) reads
// back exactly the flags that were checked; the filesystem's name is read
// the same with or without surrounding space.
func FuzzCheckMountFlags(f *testing.F) {
	f.Add("ext4", "noatime")
	f.Add("xfs", "logbsize=256k")
	f.Add(" xfs", "logbsize=256k")
	f.Add("", "ro,bind")
	f.Add("btrfs", "compress=zstd:3")
	f.Add("ext4", "data=../../etc")
	f.Add("ext4", "remount")
	f.Add("ext4", `context="system_u:object_r:container_file_t:s0:c1,c2"`)
	f.Add("ext4", `context="u:r:t:s0",bind`)
	f.Fuzz(func(t *testing.T, fsType, joined string) {
		flags := strings.Split(joined, "\x00")
		err := CheckMountFlags(fsType, flags)
		if again := CheckMountFlags(strings.TrimSpace(fsType), flags); (err == nil) != (again == nil) {
			t.Fatalf("%q and %q disagree on %q: %v / %v", fsType, strings.TrimSpace(fsType), flags, err, again)
		}
		if err != nil {
			if !errors.Is(err, volume.ErrBadMountFlag) {
				t.Fatalf("%q %q: %v is not ErrBadMountFlag", fsType, flags, err)
			}
			return
		}
		for _, fl := range flags {
			name, value, _ := strings.Cut(fl, "=")
			if slices.Contains(seLinuxOptions, name) && strings.HasPrefix(value, `"`) {
				value = strings.Trim(value, `"`) // the one place a comma may be
				fl = name + "=" + strings.ReplaceAll(value, ",", "")
			}
			if fl == "" || strings.ContainsAny(fl, ", \t\n\"'/\\") || slices.Contains([]string{"bind", "rbind", "move", "remount"}, name) {
				t.Fatalf("%q accepted for %q", fl, fsType)
			}
		}
		if back := splitMountOptions(strings.Join(flags, ",")); !slices.Equal(back, flags) {
			t.Fatalf("%q does not read back from mount -o: %q", flags, back)
		}
		var fsWords []string
		for _, fl := range flags {
			if _, vfs := vfsFlagBits[fl]; !vfs && fl != "defaults" {
				fsWords = append(fsWords, fl)
			}
		}
		// The filesystem reads mount(2)'s data as mount(8) would pass it.
		if _, data := splitOptions(flags, false); (data != "" || len(fsWords) > 0) && !slices.Equal(splitMountOptions(data), fsWords) {
			t.Fatalf("%q gives mount(2) the data %q; want the filesystem's words %q", flags, data, fsWords)
		}
	})
}

// TestSplitOptions: the per-mount words a user may pass are those of
// mount(2)'s flag table, bind excepted; each sets or clears its flag in
// order (the last word wins); the other words are the filesystem's data,
// which a bind mount has none of.
func TestSplitOptions(t *testing.T) {
	for _, w := range []string{"defaults", "ro", "nosuid", "lazytime", "loud"} {
		if !isVFSFlag(w) || CheckMountFlags("xfs", []string{w}) != nil {
			t.Errorf("per-mount word %q refused", w)
		}
	}
	if isVFSFlag("bind") || CheckMountFlags("ext4", []string{"bind"}) == nil {
		t.Error("bind accepted from a user: it would mount something else than the volume")
	}
	for _, c := range []struct {
		opts  []string
		bind  bool
		flags uintptr
		data  string
	}{
		{[]string{"defaults"}, false, 0, ""},
		{[]string{"ro", "noatime", "discard", "data=ordered"}, false, unix.MS_RDONLY | unix.MS_NOATIME, "discard,data=ordered"},
		{[]string{"ro", "rw", "nosuid", "suid", "nodev"}, false, unix.MS_NODEV, ""},
		{[]string{`context="system_u:object_r:t:s0:c1,c2"`, "noexec"}, false, unix.MS_NOEXEC, `context="system_u:object_r:t:s0:c1,c2"`},
		{[]string{"bind", "discard", "ro"}, true, unix.MS_BIND | unix.MS_RDONLY, ""},
	} {
		flags, data := splitOptions(c.opts, c.bind)
		if flags != c.flags || data != c.data {
			t.Errorf("splitOptions(%q, bind %v) = %#x, %q; want %#x, %q", c.opts, c.bind, flags, data, c.flags, c.data)
		}
	}
}

// splitMountOptions splits an -o list as libmount does: at commas outside
// double quotes.
func splitMountOptions(s string) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '"':
			quoted = !quoted
		case s[i] == ',' && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// mangle escapes as the kernel writes mountinfo fields: space, tab,
// newline and backslash as \ooo.
func mangle(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(" \t\n\\", s[i]) >= 0 {
			fmt.Fprintf(&b, "\\%03o", s[i])
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// FuzzMountInfo: the node finds mounts by their path in mountinfo (is the
// staging path this volume's mount? what holds this target?). Whatever a
// mounted path holds (spaces, newlines, backslashes, text that reads like
// an escape), the kernel's line for it parses back to that path, its root
// and its source, and a mount at another path (its parent, or a sibling
// sharing its prefix) is never taken for it, nor holds what is below it.
func FuzzMountInfo(f *testing.F) {
	for _, p := range []string{"/var/lib/kubelet/pods/x/volumes/v", "/mnt/my vol", `/a\040b`, "/tab\tnl\n", `/back\slash`, "/ü/$(x)",
		"/short\\04", "/trail ", "/a\\", "/x\\134"} {
		f.Add(p, "/", "/dev/mapper/vg0-pvc--1")
	}
	f.Add("/s", "/sub dir", `/dev/odd\name`)
	f.Fuzz(func(t *testing.T, path, root, source string) {
		if !strings.HasPrefix(path, "/") || filepath.Clean(path) != path || !strings.HasPrefix(root, "/") || source == "" ||
			strings.ContainsRune(path+root+source, 0) || !utf8.ValidString(path+root+source) {
			return // the kernel writes no such mount (mount points are clean: resolvePath)
		}
		other := path + "x"
		lines := fmt.Sprintf("1 0 8:1 / / rw - ext4 /dev/root rw\n"+
			"20 1 253:1 %s %s rw,relatime shared:1 - ext4 %s rw\n"+
			"21 1 253:2 / %s rw - xfs /dev/other rw\n", mangle(root), mangle(path), mangle(source), mangle(other))
		read := func(filter mountinfo.FilterFunc) []*mountinfo.Info {
			infos, err := mountinfo.GetMountsFromReader(strings.NewReader(lines), filter)
			if err != nil {
				t.Fatalf("%q: %v", lines, err)
			}
			return infos
		}
		findMount := func(point string) (*mountinfo.Info, error) { return topOf(read(at(point)), point) }
		mi, err := findMount(path)
		if err != nil || mi.Major != 253 || mi.Minor != 1 || mi.Root != root || mi.Source != source || mi.Mountpoint != path {
			t.Fatalf("%q: found %+v, %v", lines, mi, err)
		}
		if path != "/" {
			if mi, err := findMount(filepath.Dir(path) + "/"); err == nil && mi.Minor == 1 {
				t.Fatalf("%q: the parent found as %+v", lines, mi)
			}
		}
		if mi, err := findMount(other); err != nil || mi.Minor != 2 {
			t.Fatalf("%q: %q found as %+v, %v", lines, other, mi, err)
		}
		// What holds a path below each: its own mount, never the other
		// one, whose mount point only begins with the same text.
		for point, minor := range map[string]int{path: 1, other: 2} {
			below := strings.TrimSuffix(point, "/") + "/below"
			if mi, err := nearest(read(atOrAbove(below)), below); err != nil || mi.Major != 253 || mi.Minor != minor {
				t.Fatalf("%q: %q held by %+v, %v", lines, below, mi, err)
			}
		}
	})
}
