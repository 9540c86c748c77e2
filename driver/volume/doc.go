// Package volume is Carve's volume model, the leaf every other layer
// shares: how volumes and snapshots are named (ID, LVName), what callers
// learn of them (Volume, Snapshot), what a create asks for (CreateRequest,
// Type, ContentSource), the capacity rules (CapacityOf), the filesystems a
// volume may carry, the sentinel errors and the one table that maps them to
// gRPC codes (CodeOf). It runs no command and keeps no state: the LVM
// semantics (lvmvol), the CSI services (csi), node filesystem work (nodefs),
// the controller backend and the node agent build on it.
package volume
