package nodefs

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"
	mount "k8s.io/mount-utils"
)

// ResizeFS grows the filesystem on device, mounted at mountPath, to fill the
// device: resize2fs on the device for ext*, xfs_growfs on the mount for xfs
// (mount.ResizeFs). Both grow online and are no-ops when already full size,
// so repeating it is harmless. A blank device has nothing to grow: nil.
// ctx is checked before starting; a running resize is not interrupted, and
// only a deadline sized for the device bounds it (see exec.go).
func (m *Mounter) ResizeFS(ctx context.Context, device, mountPath string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("resize filesystem on %s at %s: %w", device, mountPath, err)
	}
	if err := CheckBlockDevice(device); err != nil {
		return fmt.Errorf("resize filesystem on %s at %s: %w", device, mountPath, err)
	}
	// mount-utils reports "resized" whenever the tool succeeded, no-op
	// included, so the log shows the sizes to tell the two apart.
	data, endData, err := m.dataWork(ctx, device)
	if err != nil {
		return fmt.Errorf("resize filesystem on %s at %s: %w", device, mountPath, err)
	}
	defer endData()
	before := totalBytes(mountPath)
	resized, err := mount.NewResizeFs(boundExec{Interface: m.exec, ctx: data}).Resize(device, mountPath)
	if err != nil {
		return fmt.Errorf("resize filesystem on %s at %s: %w", device, mountPath, err)
	}
	if resized {
		klog.InfoS("resized filesystem", "device", device, "mountPath", mountPath,
			"bytesBefore", before, "bytesAfter", totalBytes(mountPath))
	}
	return nil
}

// totalBytes is the filesystem size at path for logging, -1 if unknown.
func totalBytes(path string) int64 {
	st, err := PathStats(path)
	if err != nil {
		return -1
	}
	return st.TotalBytes
}

// NeedsResize tells whether the filesystem on device, mounted at
// mountPath, is smaller than the device (the LV grew while it was not
// staged).
func (m *Mounter) NeedsResize(ctx context.Context, device, mountPath string) (bool, error) {
	need, err := mount.NewResizeFs(m.probeExec(ctx)).NeedResize(device, mountPath)
	if err != nil {
		return false, fmt.Errorf("check size of filesystem on %s at %s: %w", device, mountPath, err)
	}
	return need, nil
}
