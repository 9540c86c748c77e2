package lvm

import (
	"context"
	"slices"

	"carve.dev/carve/lvm/runner"
)

// ignoreSuspended makes lvm2 skip device-mapper devices whose I/O is
// held while it scans for PVs, instead of reading them and hanging.
const ignoreSuspended = "devices/ignore_suspended_devices=1"

// suspendedLayersKey marks the context of the commands of one
// CreateSnapshotOf made with SnapshotOptions.SuspendedLayers. Callers ask
// for the setting by that option; the mark, private to this package,
// carries it to every command the snapshot runs, down to the repairs of
// an lvcreate cut short (runThinCommand, afterCut), which would hang on
// the suspended device as much as the lvcreate.
type suspendedLayersKey struct{}

// withSuspendedLayers is ctx for lvm2 commands run while Carve holds the
// I/O of devices above its LVs (a snapshot's freeze, driver/mapper): each
// runs with devices/ignore_suspended_devices=1. Measured with lvm2
// 2.03.16: without it, an lvcreate's device scan reads a suspended device
// and hangs in the kernel, past its timeout, even with a global_filter
// that rejects the device's name, and the resume that would free it never
// comes. Only those commands get it: a PV on a device-mapper device held
// for a moment by someone else would otherwise read as missing. They run
// as processes (runner.AsProcess): in an lvm2 shell the setting did not
// keep the scan off the layer (the lifecycle suite's thick snapshot hung
// so).
func withSuspendedLayers(ctx context.Context) context.Context {
	return runner.AsProcess(context.WithValue(ctx, suspendedLayersKey{}, true))
}

// withScanConfig adds what ctx asks of lvm2's device scan to the
// arguments of `lvm args...`: lvm2 takes one --config, so a command that
// has one gets the setting added to it.
func withScanConfig(ctx context.Context, args []string) []string {
	if !suspendedLayers(ctx) || len(args) == 0 {
		return args
	}
	if i := slices.Index(args, "--config"); i >= 0 && i+1 < len(args) {
		out := slices.Clone(args)
		out[i+1] += " " + ignoreSuspended
		return out
	}
	return slices.Concat(args[:1], []string{"--config", ignoreSuspended}, args[1:])
}

// suspendedLayers tells whether ctx is one of withSuspendedLayers.
func suspendedLayers(ctx context.Context) bool { return ctx.Value(suspendedLayersKey{}) != nil }
