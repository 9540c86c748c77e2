package volume

// Filesystems Carve makes on a volume: the CSI layer refuses others in
// requests, and the node formats, checks and grows these.
var FSTypes = []string{"ext4", "xfs", "btrfs"}

// DefaultFSType is made when a request names no filesystem.
const DefaultFSType = "ext4"

// minFSSize is the smallest volume each filesystem can be made on: mkfs.xfs
// (xfsprogs >= 5.19) refuses filesystems under 300 MiB, mkfs.btrfs under
// about 109 MiB. A volume is carved at least this big rather than fail at
// stage.
var minFSSize = map[string]int64{"xfs": 300 << 20, "btrfs": 128 << 20}

// MinSize is the smallest volume fsType can be made on (0: no minimum).
func MinSize(fsType string) int64 { return minFSSize[fsType] }

// LUKSHeaderBytes is what an encrypted volume's LUKS2 header takes from
// its LV (cryptsetup's default data offset: 16 MiB), ahead of the
// filesystem.
const LUKSHeaderBytes = 16 << 20

// minEncryptedFS is the least room an encrypted volume leaves its
// filesystem when the filesystem has no minimum of its own (ext4): a
// volume of just its header would open to an empty device.
const minEncryptedFS = 16 << 20

// MinEncryptedSize is the smallest encrypted volume of fsType: its LUKS2
// header, then room for the filesystem.
func MinEncryptedSize(fsType string) int64 {
	return LUKSHeaderBytes + max(MinSize(fsType), minEncryptedFS)
}
