package csi

import (
	"context"
	"fmt"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"carve.dev/carve/driver/crypt"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// luksType is what blkid calls a LUKS header.
const luksType = "crypto_LUKS"

// Encryption at rest on the node (see driver/crypt). An encrypted volume's
// LV holds LUKS2; NodeStage opens it as the mapping crypt.MappingName names
// and the filesystem lives on that mapping; NodeUnstage closes it. Every
// step looks at what is there before it acts, so a retry after a crash at
// any point converges:
//
//	crash after luksFormat began, before its keyslot was written
//	    → a header no key opens: formatted again (crypt.Keyslots says why);
//	crash after luksFormat, before open → the LV holds LUKS2: opened;
//	crash after open, before mkfs or mount → the mapping is open: used,
//	    and nodefs formats it only if it is blank, mounts it if not;
//	crash after the unmount of NodeUnstage, before the close → the
//	    staging path is gone, and the retry still closes the mapping.

// openedDevice is dev with its open mapping as the data device; an
// encrypted volume whose mapping is not open is not staged here.
func openedDevice(dev volumeDevice) (volumeDevice, error) {
	m, open, err := lookupMapping(dev)
	if err != nil {
		return volumeDevice{}, err
	}
	if !open {
		return volumeDevice{}, fmt.Errorf("%w: encrypted volume %s is not staged: its mapping %s is not open",
			volume.ErrFailedPrecondition, dev.ID, m.Name)
	}
	dev.Path, dev.Rdev = m.Path, m.Rdev
	return dev, nil
}

// lookupMapping finds the volume's mapping; one that is open must be
// LUKS2 over the volume's own LV.
func lookupMapping(dev volumeDevice) (crypt.Mapping, bool, error) {
	name, err := crypt.MappingName(dev.ID.VG, dev.ID.LV)
	if err != nil {
		return crypt.Mapping{}, false, err
	}
	m, open, err := crypt.Lookup(name)
	if err != nil || !open {
		return m, false, err
	}
	if err := m.Over(dev.LVRdev); err != nil {
		return m, false, err
	}
	return m, true, nil
}

// openForStage makes an encrypted volume's mapping open for NodeStage and
// returns the volume with the mapping as its data device. The LV is
// formatted only when blkid finds it blank, or when it holds a LUKS2 header
// without a keyslot (a format cut short); LUKS2 with a keyslot is opened,
// never formatted; anything else is refused and left untouched. A key that
// opens no keyslot is volume.ErrWrongKey, and nothing has changed. A
// mapping open already (the retry of a stage cut after its open) is used
// as it is: it was opened with a key that worked.
func (n *Node) openForStage(ctx context.Context, dev volumeDevice, secrets map[string]string) (volumeDevice, error) {
	key, err := crypt.KeyFrom(secrets, "node-stage")
	if err != nil {
		return volumeDevice{}, err
	}
	m, open, err := lookupMapping(dev)
	if err != nil {
		return volumeDevice{}, err
	}
	if !open {
		if err := n.formatIfBlank(ctx, dev, key); err != nil {
			return volumeDevice{}, err
		}
		if err := n.crypt.Open(ctx, dev.LVPath, m.Name, key); err != nil {
			return volumeDevice{}, fmt.Errorf("encrypted volume %s: %w", dev.ID, err)
		}
		klog.InfoS("Opened encrypted volume", "volume", dev.ID, "mapping", m.Name)
	}
	return openedDevice(dev)
}

// formatIfBlank writes a LUKS2 header to the volume's LV when it is blank
// or holds a header no key opens (see openForStage).
func (n *Node) formatIfBlank(ctx context.Context, dev volumeDevice, key crypt.Key) error {
	fsType, err := n.fs.FilesystemType(ctx, dev.LVPath)
	if err != nil {
		return err
	}
	switch fsType {
	case "":
	case luksType:
		slots, err := n.crypt.Keyslots(ctx, dev.LVPath)
		if err != nil || slots > 0 {
			return err
		}
		klog.InfoS("LUKS2 header without a keyslot (a format cut short): formatting again", "volume", dev.ID)
	default:
		return fmt.Errorf("%w: encrypted volume %s: its LV %s holds %q, not LUKS2; not formatting it",
			volume.ErrFilesystemMismatch, dev.ID, dev.LVPath, fsType)
	}
	klog.InfoS("Formatting encrypted volume as LUKS2", "volume", dev.ID, "device", dev.LVPath)
	if err := n.crypt.Format(ctx, dev.LVPath, key); err != nil {
		return fmt.Errorf("encrypted volume %s: %w", dev.ID, err)
	}
	return nil
}

// closeMapping closes the volume's mapping if it is open: NodeUnstage's
// last step, also when the staging path was gone already. Only the mapping
// of Carve's name for this volume, LUKS2 over this volume's LV, is closed;
// a device of that name that is not one, beside a volume that is not
// encrypted, is not Carve's and is left alone.
func (n *Node) closeMapping(ctx context.Context, id volume.ID) error {
	name, err := crypt.MappingName(id.VG, id.LV)
	if err != nil {
		return nil // names too long for a mapping: no volume of them was ever opened
	}
	m, open, lookErr := crypt.Lookup(name)
	if lookErr == nil && !open {
		return nil
	}
	vol, err := n.volumes.GetVolume(ctx, lvm.Fresh, id)
	if err != nil {
		return fmt.Errorf("mapping %s is there, but its volume: %w", name, err)
	}
	if !vol.Encrypted {
		return nil
	}
	if lookErr != nil {
		return lookErr
	}
	if err := m.Over(unix.Mkdev(uint32(vol.KernelMajor), uint32(vol.KernelMinor))); err != nil {
		return err
	}
	if err := n.crypt.Close(ctx, name); err != nil {
		return fmt.Errorf("encrypted volume %s: %w", id, err)
	}
	klog.InfoS("Closed encrypted volume", "volume", id, "mapping", name)
	return nil
}

// growMapping grows an encrypted volume's open mapping to its LV's new
// size, before its filesystem grows: the node-expand secret's key reloads
// the mapping (crypt.Cryptsetup.Resize).
func (n *Node) growMapping(ctx context.Context, dev volumeDevice, secrets map[string]string) error {
	key, err := crypt.KeyFrom(secrets, "node-expand")
	if err != nil {
		return err
	}
	m, _, err := lookupMapping(dev)
	if err != nil {
		return err
	}
	return n.crypt.Resize(ctx, m.Name, key)
}
