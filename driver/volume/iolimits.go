package volume

// IOLimits caps the IO that the pods using a volume make on its device:
// bytes and operations per second, read and write apart. 0 is no limit.
// The node enforces them with cgroup v2's io.max on each pod's cgroup
// (driver/iolimit); they hold for the pod as a whole, its containers
// together.
type IOLimits struct {
	ReadBPS, WriteBPS, ReadIOPS, WriteIOPS uint64
}

// IsZero tells limits that limit nothing.
func (l IOLimits) IsZero() bool { return l == IOLimits{} }

// ChangesLimits tells whether m names any IO limit.
func (m Mutable) ChangesLimits() bool {
	return m.ReadBPS != nil || m.WriteBPS != nil || m.ReadIOPS != nil || m.WriteIOPS != nil
}

// Limits is cur with the limits m names in place of cur's.
func (m Mutable) Limits(cur IOLimits) IOLimits {
	for _, f := range []struct {
		want *uint64
		have *uint64
	}{{m.ReadBPS, &cur.ReadBPS}, {m.WriteBPS, &cur.WriteBPS}, {m.ReadIOPS, &cur.ReadIOPS}, {m.WriteIOPS, &cur.WriteIOPS}} {
		if f.want != nil {
			*f.have = *f.want
		}
	}
	return cur
}
