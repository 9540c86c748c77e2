package volume

import (
	"time"
)

// Snapshot is what callers learn of a Carve snapshot.
type Snapshot struct {
	ID        ID
	Name      string
	Source    ID
	SizeBytes int64
	CreatedAt time.Time
	Ready     bool
}
