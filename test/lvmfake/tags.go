package lvmfake

import (
	"fmt"
	"slices"
	"sync"
)

// CheckTag, when set, vets every tag a call of any fake writes (lvcreate's
// tags, --addtag): a tag it refuses is kept (Refused), and the call goes on
// as lvm2 would, so that a write whose failure its caller only logs (a
// progress record) is caught as well. lvmvol's tests set it to Carve's tag
// schema (lvmvol's tags.go), so that a tag written in any path they take
// and not listed there fails them.
var CheckTag func(tag string) bool

var refused struct {
	mu   sync.Mutex
	tags []string
}

// Refused lists the tags CheckTag refused so far, each with its call,
// once.
func Refused() []string {
	refused.mu.Lock()
	defer refused.mu.Unlock()
	return append([]string(nil), refused.tags...)
}

// vet passes the tags call writes to CheckTag.
func vet(call string, tags []string) {
	if CheckTag == nil {
		return
	}
	for _, t := range tags {
		if !CheckTag(t) {
			refused.mu.Lock()
			if r := fmt.Sprintf("%s %q", call, t); !slices.Contains(refused.tags, r) {
				refused.tags = append(refused.tags, r)
			}
			refused.mu.Unlock()
		}
	}
}
