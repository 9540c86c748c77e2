package nodefs

import (
	"context"
	"fmt"

	utilexec "k8s.io/utils/exec"

	"carve.dev/carve/lvm/runner"
)

// Every command nodefs runs has its class (see lvm/runner), chosen where
// the command is written, by the context it is made with:
//   - Probes (blkid; blockdev and btrfs inspect-internal in NeedsResize)
//     are metadata commands bound to the caller's ctx: they only read, so
//     killing them is harmless, and the runner's short timeout notices a
//     hang.
//   - Data work (mkfs.*, fsck, resize2fs, xfs_growfs, btrfs filesystem
//     resize), whose time grows with the device, runs under the context
//     dataWork returns: detached from ctx, with a deadline sized for the
//     device. A format cut short could leave a partial signature, and then
//     the device would be refused forever instead of formatted; a fsck or
//     resize cut short leaves the same work to redo, and would be cut
//     again. So neither the caller's cancellation nor the metadata timeout
//     stops them, only a hang that outlasts the budget.
//
// FormatAndMount writes its blkid, mkfs and fsck itself (format.go), each
// with its context. mount-utils' functions that run commands (GetDiskFormat,
// ResizeFs) call Command, without a context, so they get the exec of one
// class for the whole call (boundExec): NeedsResize only probes; ResizeFS
// is data work, its one blkid included (taking a probe for data work only
// delays noticing its hang; taking data work for a probe would kill it).
// Nothing reads a command's name or arguments to decide its class.

// boundExec is m's exec with every command bound to ctx, for a mount-utils
// call, which only ever uses Command.
type boundExec struct {
	utilexec.Interface
	ctx context.Context
}

func (e boundExec) Command(name string, args ...string) utilexec.Cmd {
	return e.CommandContext(e.ctx, name, args...)
}

// probeExec is the exec of a call that only probes.
func (m *Mounter) probeExec(ctx context.Context) boundExec {
	return boundExec{Interface: m.exec, ctx: ctx}
}

// dataWork is the context of data work on device, with a deadline sized
// for it; done ends it.
func (m *Mounter) dataWork(ctx context.Context, device string) (data context.Context, done context.CancelFunc, err error) {
	size, err := BlockSize(device)
	if err != nil {
		return nil, nil, fmt.Errorf("size the work on %s: %w", device, err)
	}
	data, done = runner.DataWork(context.WithoutCancel(ctx), runner.DataBudget(size))
	return data, done, nil
}
