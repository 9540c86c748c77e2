package volume

// Volume is what callers learn of a Carve LV.
type Volume struct {
	ID        ID
	Name      string // CSI name, when recorded in a tag
	SizeBytes int64
	// Published is true while the LV is active: in Carve, active means
	// published (see doc.go).
	Published  bool
	DevicePath string
	// KernelMajor and KernelMinor are the device number lvm reports for
	// the LV, -1 while it is not active: the node checks that the device
	// node it is about to format or mount has this number.
	KernelMajor, KernelMinor int
	Health                   []Problem
	// Source is where the volume's data came from, nil for a blank one.
	Source *ContentSource
	// Encrypted: the volume's data is LUKS2 on its LV (encryption at
	// rest); the node opens it with the node-stage secret's key.
	Encrypted bool
	// Limits are the IO limits the node puts on the pods using it.
	Limits IOLimits
}

// Problem is one adverse health condition of a volume, as LVM reports it.
type Problem struct {
	Kind    ProblemKind
	Reason  string // CamelCase, for machines and short displays
	Message string
}

// ProblemKind follows CSI's VolumeHealthErrorType.
type ProblemKind int

const (
	// Degraded: usable, not operating optimally.
	Degraded ProblemKind = iota + 1
	// Inaccessible: the volume cannot be used.
	Inaccessible
	// DataLoss: data is known or suspected lost.
	DataLoss
)

var problemNames = map[ProblemKind]string{Degraded: "Degraded", Inaccessible: "Inaccessible", DataLoss: "DataLoss"}

// String is the kind's name, as resources record it.
func (k ProblemKind) String() string { return problemNames[k] }

// ParseProblemKind reads a name String gave; unknown names are 0.
func ParseProblemKind(name string) ProblemKind {
	for k, n := range problemNames {
		if n == name {
			return k
		}
	}
	return 0
}

// DevicePath is where the device of a published volume appears on its
// node: lvm creates /dev/vg/lv itself when udev is not there to do it, so
// this path holds either way.
func DevicePath(id ID) string { return "/dev/" + id.VG + "/" + id.LV }
