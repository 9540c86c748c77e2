package lvmvol

import "carve.dev/carve/lvm"

// Every read of lvm2 says how fresh it must be (lvm.Reads), chosen by the
// operation it is for:
//   - lvm.Cached: a query's. The Manager's LVM, an lvm.Cache, may answer
//     from a recent report instead of running lvm2 (see lvm.Cache for why
//     that cannot miss a change Carve made). Queries are what a CO and
//     kubelet poll: capacity, listings, stats and liveness. Health is no
//     query: a failed disk must show at once. Nothing that creates,
//     changes or removes a volume is one: those decide on fresh reads, so
//     a report that is stale by a change made outside Carve can only make
//     a query's answer late, never make Carve act on a volume wrongly.
//   - lvm.Fresh: every other read, unless the operation shares its reads
//     (sharedReads).

// sharedReads is the reads of one operation: when the Manager's LVM is
// an lvm.Cache, the operation's reads of a VG share one report, read
// afresh for it, and read again after each change (lvm.Shared). That is
// as fresh as reading each LV on its own: every report is read after the
// operation began and after its last change, so no decision rests on
// anything older than the operation. Not for reads that must see what
// the kernel did meanwhile without a command of Carve's, such as whether
// a frozen point overflowed during a copy: those run in background jobs,
// which read lvm.Fresh.
func sharedReads() lvm.Reads { return lvm.Shared() }
