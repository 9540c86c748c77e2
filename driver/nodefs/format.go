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
	utilexec "k8s.io/utils/exec"

	"carve.dev/carve/driver/volume"
)

// FormatAndMount mounts device at target (PrepareTarget), formatting it
// with fsType ("" → ext4, or xfs) only when it carries no filesystem, with
// mkfs's default options and then mkfsOpts (vetted for fsType: an error
// wrapping volume.ErrInvalidArgument otherwise). A filesystem that is
// there is mounted as it is, whatever mkfsOpts say.
//
// Why we never reformat: a device with any signature (another filesystem, a
// partition table, an LVM or LUKS header) may hold someone's data — a
// volume restored from elsewhere, or a mistake in the caller. Formatting is
// irreversible, so a mismatch is an error wrapping volume.ErrFilesystemMismatch and
// the device is left untouched. Only a device blkid finds blank is formatted.
//
// The steps are Carve's own, in this order, each a command through m's
// exec with its class (exec.go): one probe (mount-utils' GetDiskFormat, its
// reading of blkid), the decision on what it found (blank: mkfs; this
// fsType: fsck -a when read-write; anything else: refused), then the mount
// (kernelMounter: mount(2)). mount-utils' SafeFormatAndMount did the
// same steps, but kept the decision to itself: to refuse a foreign
// filesystem on its one probe, and to give its mkfs the data class, Carve
// used to pick its commands out by name and argument position ("the
// device is last") and replay blkid's output, which a mount-utils release
// could change without any error. Here nothing depends on how mount-utils
// orders or names its commands: GetDiskFormat's contract is its result,
// and TestMountUtilsContract holds it to that on real devices.
//
// Idempotency: if target is already a mount point, it is fine when the mount
// is the root of this device's filesystem (same device number, per
// mountinfo) with the same read-only mode; anything else is volume.ErrMountConflict.
// Other mount options of an existing mount are not compared.
//
// formatted tells that the device was blank and was formatted for this
// mount: its filesystem then fills the device (mkfs is given no size), so
// the caller has nothing to grow.
func (m *Mounter) FormatAndMount(ctx context.Context, device, target, fsType string, mkfsOpts MkfsOptions, options []string) (formatted bool, err error) {
	fsType, err = normalizeFSType(fsType)
	if err != nil {
		return false, fmt.Errorf("mount %s at %s: %w", device, target, err)
	}
	if !mkfsOpts.IsZero() && mkfsOpts.fsType != fsType {
		return false, fmt.Errorf("%w: mount %s at %s: mkfs options %q are vetted for %s, not %s",
			volume.ErrInvalidArgument, device, target, mkfsOpts.Args(), mkfsOpts.fsType, fsType)
	}
	if err := CheckBlockDevice(device); err != nil {
		return false, fmt.Errorf("mount %s at %s: %w", device, target, err)
	}
	if err := m.PrepareTarget(target, true); err != nil {
		return false, fmt.Errorf("mount %s at %s: %w", device, target, err)
	}
	readOnly := slices.Contains(options, "ro")
	done, err := m.alreadyMounted(device, target, readOnly)
	if err != nil || done {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("mount %s at %s: %w", device, target, err)
	}
	existing, err := m.diskFormat(ctx, device)
	if err != nil {
		return false, fmt.Errorf("mount %s at %s: detect filesystem: %w", device, target, err)
	}
	switch {
	case existing == "" && readOnly:
		return false, fmt.Errorf("%w: %s is blank, and asked read-only: nothing to mount, and no format in read-only mode",
			volume.ErrCannotFormat, device)
	case existing == "":
		if err := m.format(ctx, device, fsType, mkfsOpts); err != nil {
			return false, fmt.Errorf("mount %s at %s: %w", device, target, err)
		}
	case existing != fsType:
		return false, fmt.Errorf("%w: device %s holds %q, asked for %q; not reformatting",
			volume.ErrFilesystemMismatch, device, existing, fsType)
	case !readOnly:
		if err := m.fsck(ctx, device); err != nil {
			return false, fmt.Errorf("mount %s at %s: %w", device, target, err)
		}
	}
	// Cloned: the caller's slice is not the mounter's to keep.
	if err := m.mounter.Mount(device, target, fsType, slices.Clone(options)); err != nil {
		return false, fmt.Errorf("mount %s at %s as %s: %w", device, target, fsType, err)
	}
	klog.InfoS("mounted", "device", device, "target", target, "fsType", fsType, "options", options, "formatted", existing == "")
	return existing == "", nil
}

// diskFormat is what blkid finds on device, as mount-utils reads it
// (GetDiskFormat): a filesystem type, "" when blank, "unknown data,
// probably partitions" for a partition table; one blkid, a probe bound to
// ctx.
func (m *Mounter) diskFormat(ctx context.Context, device string) (string, error) {
	return (&mount.SafeFormatAndMount{Exec: m.probeExec(ctx)}).GetDiskFormat(device)
}

// mkfsArgs are the arguments of mkfs.<fsType> on a blank device: those
// mount-utils' SafeFormatAndMount gave it (ext4: -F, no blocks reserved
// for root unless the class says -m; xfs: -f), so that volumes are made as
// they were, then the class's vetted options, and the device last.
func mkfsArgs(fsType string, opts MkfsOptions, device string) []string {
	var args []string
	switch fsType {
	case "ext4":
		args = append(args, "-F")
		if !opts.has("-m") {
			args = append(args, "-m0")
		}
	case "xfs":
		args = append(args, "-f")
	}
	args = append(args, opts.args...)
	return append(args, device)
}

// format runs mkfs on device, which the probe just found blank, as data
// work (exec.go), logged at level 0 whatever the verbosity. A refusal of
// mkfs (too small for xfs, an option the tools reject) is
// volume.ErrCannotFormat.
func (m *Mounter) format(ctx context.Context, device, fsType string, opts MkfsOptions) error {
	data, done, err := m.dataWork(ctx, device)
	if err != nil {
		return err
	}
	defer done()
	tool, args := "mkfs."+fsType, mkfsArgs(fsType, opts, device)
	klog.InfoS("formatting", "device", device, "fsType", fsType, "args", args)
	out, err := m.exec.CommandContext(data, tool, args...).CombinedOutput()
	if err != nil {
		klog.ErrorS(err, "format failed", "device", device, "fsType", fsType, "output", string(out))
		return fmt.Errorf("%w: %s %s: %w: %s", volume.ErrCannotFormat, tool, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	klog.InfoS("formatted", "device", device, "fsType", fsType)
	return nil
}

// fsckUncorrected is the bit of fsck(8)'s exit status (a sum of
// conditions) that says errors were left uncorrected.
const fsckUncorrected = 4

// fsck checks and repairs device's filesystem with fsck -a before a
// read-write mount, as data work. A filesystem fsck -a would not repair is
// volume.ErrFilesystemDamaged, which says what the operator runs (a CO's
// retry cannot help; the data is there, and a repair is a decision Carve
// leaves to a person). Anything else (errors corrected, no fsck installed,
// fsck failing to run) is logged and the mount goes ahead, as mount-utils
// did: the kernel's own checks at mount still stand.
func (m *Mounter) fsck(ctx context.Context, device string) error {
	data, done, err := m.dataWork(ctx, device)
	if err != nil {
		return err
	}
	defer done()
	out, err := m.exec.CommandContext(data, "fsck", "-a", device).CombinedOutput()
	var ee utilexec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee) && ee.ExitStatus()&fsckUncorrected != 0:
		return fmt.Errorf("%w (repair it with e2fsck -f, or xfs_repair, on the unstaged device): fsck -a %s: %w: %s",
			volume.ErrFilesystemDamaged, device, err, strings.TrimSpace(string(out)))
	case errors.As(err, &ee) && ee.ExitStatus() == 1:
		klog.InfoS("fsck corrected errors", "device", device, "output", string(out))
	default:
		klog.InfoS("fsck did not check the filesystem; mounting it as it is", "device", device, "err", err, "output", string(out))
	}
	return nil
}

// FilesystemType returns what blkid finds on device: a filesystem type, ""
// when blank, or mount-utils' "unknown data, probably partitions" for a
// partition table. The device must exist: blkid's "nothing found" exit code
// is also what it returns for a missing path, which would read as blank.
func (m *Mounter) FilesystemType(ctx context.Context, device string) (string, error) {
	if err := CheckBlockDevice(device); err != nil {
		return "", fmt.Errorf("detect filesystem on %s: %w", device, err)
	}
	fsType, err := m.diskFormat(ctx, device)
	if err != nil {
		return "", fmt.Errorf("detect filesystem on %s: %w", device, err)
	}
	return fsType, nil
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
