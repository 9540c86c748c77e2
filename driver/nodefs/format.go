package nodefs

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
	mount "k8s.io/mount-utils"

	"carve.dev/carve/driver/volume"
)

// FormatAndMount mounts device at target (PrepareTarget), formatting it
// with fsType ("" → ext4, or xfs) only when it carries no filesystem.
//
// Why we never reformat: a device with any signature (another filesystem, a
// partition table, an LVM or LUKS header) may hold someone's data — a
// volume restored from elsewhere, or a mistake in the caller. Formatting is
// irreversible, so a mismatch is an error wrapping volume.ErrFilesystemMismatch and
// the device is left untouched. Only a device blkid finds blank is formatted.
// The check is made on mount.SafeFormatAndMount's own blkid, the one it
// decides to mkfs on (probeGuard): one probe, and nothing between the check
// and the decision.
//
// Idempotency: if target is already a mount point, it is fine when the mount
// is the root of this device's filesystem (same device number, per
// mountinfo) with the same read-only mode; anything else is volume.ErrMountConflict.
// Other mount options of an existing mount are not compared.
//
// formatted tells that the device was blank and was formatted for this
// mount: its filesystem then fills the device (mkfs is given no size), so
// the caller has nothing to grow.
func (m *Mounter) FormatAndMount(ctx context.Context, device, target, fsType string, options []string) (formatted bool, err error) {
	fsType, err = normalizeFSType(fsType)
	if err != nil {
		return false, fmt.Errorf("mount %s at %s: %w", device, target, err)
	}
	if err := checkBlockDevice(device); err != nil {
		return false, fmt.Errorf("mount %s at %s: %w", device, target, err)
	}
	if err := m.PrepareTarget(target, true); err != nil {
		return false, fmt.Errorf("mount %s at %s: %w", device, target, err)
	}
	done, err := m.alreadyMounted(device, target, slices.Contains(options, "ro"))
	if err != nil || done {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("mount %s at %s: %w", device, target, err)
	}
	ex, endData, err := m.dataExec(ctx, device)
	if err != nil {
		return false, fmt.Errorf("mount %s at %s: %w", device, target, err)
	}
	defer endData()
	guard := &probeGuard{device: device, fsType: fsType}
	ex.probe = guard
	sfm := &mount.SafeFormatAndMount{Interface: m.mounter, Exec: ex}
	// Clone: SafeFormatAndMount appends "defaults" to the slice it is given,
	// which would write into the caller's backing array.
	err = sfm.FormatAndMount(device, target, fsType, slices.Clone(options))
	if guard.refused != nil {
		return false, guard.refused
	}
	if err != nil {
		return false, fmt.Errorf("mount %s at %s as %s: %w", device, target, fsType, classifyMountError(err))
	}
	klog.InfoS("mounted", "device", device, "target", target, "fsType", fsType, "options", options)
	// Blank before, mounted now: SafeFormatAndMount formatted it (it
	// mounts a blank device only after mkfs). Unprobed, it is taken as
	// found formatted, which only costs the caller a grow check.
	return guard.probed && guard.existing == "", nil
}

// classifyMountError marks mount-utils' refusals as states of the device,
// not failures of Carve: a format refused is volume.ErrCannotFormat, a
// filesystem fsck -a would not repair volume.ErrFilesystemDamaged, which
// says what the operator runs (a CO's retry cannot help; the data is
// there, and a repair is a decision Carve leaves to a person).
func classifyMountError(err error) error {
	var me mount.MountError
	switch {
	case !errors.As(err, &me):
		return err
	case me.Type == mount.FormatFailed || me.Type == mount.UnformattedReadOnly:
		return fmt.Errorf("%w: %w", volume.ErrCannotFormat, err)
	case me.Type == mount.HasFilesystemErrors:
		return fmt.Errorf("%w (repair it with e2fsck -f, or xfs_repair, on the unstaged device): %w", volume.ErrFilesystemDamaged, err)
	}
	return err
}

// FilesystemType returns what blkid finds on device: a filesystem type, ""
// when blank, or mount-utils' "unknown data, probably partitions" for a
// partition table. The device must exist: blkid's "nothing found" exit code
// is also what it returns for a missing path, which would read as blank.
func (m *Mounter) FilesystemType(ctx context.Context, device string) (string, error) {
	if err := checkBlockDevice(device); err != nil {
		return "", fmt.Errorf("detect filesystem on %s: %w", device, err)
	}
	sfm := &mount.SafeFormatAndMount{Interface: m.mounter, Exec: m.probeExec(ctx)}
	fsType, err := sfm.GetDiskFormat(device)
	if err != nil {
		return "", fmt.Errorf("detect filesystem on %s: %w", device, err)
	}
	return fsType, nil
}

// probeGuard refuses a device that holds anything but blank or fsType, on
// the blkid SafeFormatAndMount runs to decide between mkfs and mount:
// alone, it would only warn of a foreign filesystem and try to mount it as
// fsType. The guard reads that blkid's result as mount-utils does
// (GetDiskFormat) and, on a foreign one, fails the probe, which ends
// SafeFormatAndMount before mkfs or mount; refused says why. A separate
// blkid before it cost every NodeStage one more process
// (docs/performance.md), and checked a moment earlier than the decision.
type probeGuard struct {
	device, fsType string
	probed         bool
	existing       string // what the probe found: "" when blank
	refused        error
}

// check judges the result of blkid on the device; a non-nil error
// replaces the probe's own.
func (g *probeGuard) check(out []byte, runErr error) error {
	replay := &replayExec{out: out, err: runErr}
	existing, err := (&mount.SafeFormatAndMount{Exec: replay}).GetDiskFormat(g.device)
	if err != nil {
		return err
	}
	g.probed, g.existing = true, existing
	if existing != "" && existing != g.fsType {
		g.refused = fmt.Errorf("%w: device %s holds %q, asked for %q; not reformatting",
			volume.ErrFilesystemMismatch, g.device, existing, g.fsType)
		return g.refused
	}
	return runErr
}

// alreadyMounted is true when target is already a mount of device's
// filesystem root in the asked read-only mode; an error wrapping
// volume.ErrMountConflict when it is a mount of anything else.
func (m *Mounter) alreadyMounted(device, target string, readOnly bool) (bool, error) {
	mounted, err := m.IsMountPoint(target)
	if err != nil || !mounted {
		return false, err
	}
	mi, err := mountAt(target)
	if err != nil {
		return false, err
	}
	rdev, err := deviceNumber(device)
	if err != nil {
		return false, err
	}
	sameDev := uint32(mi.Major) == unix.Major(rdev) && uint32(mi.Minor) == unix.Minor(rdev)
	if !sameDev || mi.Root != "/" {
		return false, fmt.Errorf("%w: %s is mounted from %s (%d:%d, root %s), not %s",
			volume.ErrMountConflict, target, mi.Source, mi.Major, mi.Minor, mi.Root, device)
	}
	if ro := slices.Contains(strings.Split(mi.Options, ","), "ro"); ro != readOnly {
		return false, fmt.Errorf("%w: %s is already mounted from %s with read-only=%t, asked read-only=%t",
			volume.ErrMountConflict, target, device, ro, readOnly)
	}
	klog.V(2).InfoS("already mounted", "device", device, "target", target)
	return true, nil
}

func normalizeFSType(fsType string) (string, error) {
	if fsType == "" {
		return volume.DefaultFSType, nil
	}
	if !slices.Contains(volume.FSTypes, fsType) {
		return "", fmt.Errorf("%w %q (supported: %v)", volume.ErrUnsupportedFilesystem, fsType, volume.FSTypes)
	}
	if _, err := exec.LookPath("mkfs." + fsType); err != nil {
		return "", fmt.Errorf("mkfs.%s: %w", fsType, volume.ErrToolMissing)
	}
	return fsType, nil
}
