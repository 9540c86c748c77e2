package lvmvol

import "time"

// SetDataWorkSteps makes tests' wipes zero chunk bytes per command and
// record progress every (0: after every chunk).
func (m *Manager) SetDataWorkSteps(chunk int64, every time.Duration) {
	m.wipeChunk, m.progressEvery = chunk, every
}

// InSchema tells a tag of the schema (tags.go).
var InSchema = inSchema
