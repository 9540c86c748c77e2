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
	// Encrypted: the snapshot holds its volume's LUKS2 header and
	// ciphertext, so a restore of it is encrypted too.
	Encrypted bool
	// Group is the group snapshot it is a member of; zero if none.
	Group ID
}

// GroupSnapshot is what callers learn of a Carve group snapshot: its
// members hold their volumes at one instant.
type GroupSnapshot struct {
	ID        ID
	Snapshots []Snapshot
	CreatedAt time.Time
	// Ready: every member is ready to use.
	Ready bool
}

// Add adds a member: the group is ready while all its members are, and
// was made when its first member was.
func (g *GroupSnapshot) Add(s Snapshot) {
	if len(g.Snapshots) == 0 {
		g.Ready = true
	}
	g.Snapshots = append(g.Snapshots, s)
	g.Ready = g.Ready && s.Ready
	if g.CreatedAt.IsZero() || s.CreatedAt.Before(g.CreatedAt) {
		g.CreatedAt = s.CreatedAt
	}
}
