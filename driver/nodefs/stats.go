package nodefs

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Stats are a mounted filesystem's capacity and inode counts.
type Stats struct {
	TotalBytes, AvailableBytes, UsedBytes int64
	TotalInodes, FreeInodes, UsedInodes   int64
}

// PathStats returns statfs figures for the filesystem mounted at path.
// AvailableBytes is what an unprivileged writer can use, so on ext4 with
// reserved blocks Total ≠ Available + Used; that is what df shows as well.
func PathStats(path string) (Stats, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return Stats{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	return statsFromStatfs(&st), nil
}

func statsFromStatfs(st *unix.Statfs_t) Stats {
	// Block counts are in fragment-size units; Linux sets Frsize to Bsize
	// for ext4/xfs, but older kernels may leave it zero.
	unit := st.Frsize
	if unit == 0 {
		unit = st.Bsize
	}
	return Stats{
		TotalBytes:     int64(st.Blocks) * unit,
		AvailableBytes: int64(st.Bavail) * unit,
		UsedBytes:      int64(st.Blocks-st.Bfree) * unit,
		TotalInodes:    int64(st.Files),
		FreeInodes:     int64(st.Ffree),
		UsedInodes:     int64(st.Files - st.Ffree),
	}
}
