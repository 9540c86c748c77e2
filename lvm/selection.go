package lvm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// lvm2's device selection: which devices lvm2 reads, and so which PVs of
// a VG it finds, is decided by the devices file (devices/use_devicesfile;
// devices/devicesfile names it, a file in the system dir's devices/) and
// by lvm.conf and lvmlocal.conf (filters, use_devicesfile). An
// administrator's `lvmdevices --deldev` or a new filter hides a PV from
// lvm2 without writing any PV's metadata: the metadata headers do not
// move, yet lvm2 now reports the VG with a PV missing. The selection
// print, part of a VG's print (cacheprint.go), moves instead.

// defaultSystemDir is where lvm2 reads its configuration unless
// LVM_SYSTEM_DIR says otherwise (DEFAULT_SYS_DIR, as distributions build
// lvm2).
const defaultSystemDir = "/etc/lvm"

// systemDir is the directory the lvm2 commands of c read lvm.conf,
// lvmlocal.conf and the devices file from: LVM_SYSTEM_DIR in their
// environment (WritePrivateConfig's, in tests), else lvm2's default.
func (c *Client) systemDir() string {
	look := os.LookupEnv
	if r, ok := c.r.(interface{ LookupEnv(string) (string, bool) }); ok {
		look = r.LookupEnv
	}
	if d, ok := look("LVM_SYSTEM_DIR"); ok && d != "" {
		return d
	}
	return defaultSystemDir
}

// selectionPrint is the identity of what lvm2 reads in the system dir
// to select its devices: lvm.conf, lvmlocal.conf and every file in
// devices/ (whichever of them devices/devicesfile names: a change of
// that setting moves lvm.conf's print anyway). lvm2's backups of the
// devices file, in devices/backup/, are never read and left out. A
// missing file prints as "-", distinct from any file.
func selectionPrint(dir string) string {
	var b strings.Builder
	for _, name := range []string{"lvm.conf", "lvmlocal.conf"} {
		fmt.Fprintf(&b, "%s=%s;", name, fileIdentity(filepath.Join(dir, name)))
	}
	devs := filepath.Join(dir, "devices")
	entries, err := os.ReadDir(devs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return b.String() + "devices/=-;"
	case err != nil:
		return b.String() + "devices/=" + err.Error() + ";"
	}
	for _, e := range entries {
		if !e.IsDir() {
			fmt.Fprintf(&b, "devices/%s=%s;", e.Name(), fileIdentity(filepath.Join(devs, e.Name())))
		}
	}
	return b.String()
}

// fileIdentity tells a version of the file at path by its inode: device
// and number, size, mtime and ctime; "-" when there is no such file.
//
// Not a hash of its content: lvm.conf as distributions ship it is some
// 100 KiB of comments, which a hash would read at every comparison (once
// a second per VG), where a stat reads nothing. And every way these files
// change moves the stat: lvmdevices writes system.devices_new and renames
// it over the file (a new inode), an editor does the same or writes in
// place (size, mtime, ctime), and a tool that puts the old mtime back
// (cp -p, touch -r) cannot put back the ctime. A stat moved with nothing
// changed (a touch) costs one lvm2 run; the one change it may miss, a
// rewrite in place to the same size within one tick of the file system's
// clock after the print was taken, still shows within the Cache's MaxAge.
func fileIdentity(path string) string {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return "-"
		}
		return "error " + err.Error() // unreadable is a state of its own
	}
	return fmt.Sprintf("%d:%d/%d/%d.%09d/%d.%09d", st.Dev, st.Ino, st.Size,
		st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
}
