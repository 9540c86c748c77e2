package lvmvol

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"carve.dev/carve/lvm"
)

// Progress of long data work.
//
// A wipe or a copy can be cut short: the process restarts, the node
// reboots, the work's deadline passes, a device errors. Starting again from
// byte 0 each time would never finish a volume whose work takes longer than
// the gap between interruptions. So the work records how far it has got in
// a tag on the LV it writes, where a retry finds it:
//   - carve.dev/wiped=N on a deleting LV: its first N bytes are zeroed.
//   - carve.dev/copied=UUID:N on a copying LV: its first N bytes hold the
//     data of the source LV with that UUID. The UUID ties the record to one
//     source: a frozen point made anew for a retry (its predecessor
//     overflowed) is another image, and the record does not apply to it.
//
// Why resuming is safe: a record is written only after the device has
// flushed the bytes it counts, so they survive a power loss; the LV written
// is never handed out meanwhile (deleting and copying LVs are not settled),
// so nothing else writes it; and the source of a copy never changes (a
// frozen point or a snapshot). A record that does not parse, is out of
// range or belongs to another source is ignored: the work starts at 0.
//
// Records are written at most every progressEvery, not per chunk: each is
// an lvm metadata commit, which a fast device would otherwise spend more
// time on than on the data.

// defaultProgressEvery: a restart loses at most this much work.
const defaultProgressEvery = time.Minute

// progress records how far one piece of data work on an LV has got.
type progress struct {
	m      *Manager
	vg, lv string
	prefix string   // the kind of record (tagWipedPrefix, tagCopiedPrefix)
	source string   // the source's UUID, for copies; "" for wipes
	held   []string // records of this kind on the LV, stale ones included
	last   time.Time
}

func (m *Manager) progressOf(lv lvm.LV, prefix, source string) *progress {
	p := &progress{m: m, vg: lv.VGName, lv: lv.Name, prefix: prefix, source: source, last: time.Now()}
	for _, t := range lv.Tags {
		if strings.HasPrefix(t, prefix) {
			p.held = append(p.held, t)
		}
	}
	return p
}

// resume returns where the work may continue: the furthest valid record,
// within (0, size] and a multiple of align; 0 when there is none.
func (p *progress) resume(size, align int64) int64 {
	var from int64
	for _, t := range p.held {
		v := strings.TrimPrefix(t, p.prefix)
		if p.source != "" {
			src, n, ok := strings.Cut(v, ":")
			if !ok || src != p.source {
				continue
			}
			v = n
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil && n > 0 && n <= size && n%align == 0 {
			from = max(from, n)
		}
	}
	if from > 0 {
		klog.InfoS("Resuming data work where it was recorded", "lv", p.vg+"/"+p.lv, "record", p.prefix, "bytes", from, "of", size)
	}
	return from
}

func (p *progress) tag(done int64) string {
	if p.source != "" {
		return p.prefix + p.source + ":" + strconv.FormatInt(done, 10)
	}
	return p.prefix + strconv.FormatInt(done, 10)
}

// checkpoint records done when progressEvery has passed since the last
// record: flush first, so that the record never counts bytes a power loss
// could take back, then add the new record, then drop the older ones (a
// crash in between leaves several; resume takes the furthest). A failed
// flush is the work's failure. A record that cannot be written is only
// logged: the work itself is fine, a restart merely redoes more of it.
func (p *progress) checkpoint(ctx context.Context, done int64, flush func() error) error {
	if time.Since(p.last) < p.m.progressEvery {
		return nil
	}
	if err := flush(); err != nil {
		return err
	}
	p.last = time.Now()
	t := p.tag(done)
	if err := p.m.lvm.AddTags(ctx, p.vg, p.lv, t); err != nil {
		klog.ErrorS(err, "Could not record progress; continuing", "lv", p.vg+"/"+p.lv, "bytes", done)
		return nil
	}
	p.drop(ctx, t)
	return nil
}

// clear drops every record: the work is done, or moot.
func (p *progress) clear(ctx context.Context) {
	p.drop(ctx, "")
}

// drop removes the records held, except keep.
func (p *progress) drop(ctx context.Context, keep string) {
	old := slices.DeleteFunc(slices.Clone(p.held), func(t string) bool { return t == keep })
	if len(old) > 0 {
		if err := p.m.lvm.RemoveTags(ctx, p.vg, p.lv, old...); err != nil {
			klog.ErrorS(err, "Could not drop old progress records", "lv", p.vg+"/"+p.lv, "tags", old)
			if keep != "" && !slices.Contains(p.held, keep) {
				p.held = append(p.held, keep)
			}
			return
		}
	}
	p.held = nil
	if keep != "" {
		p.held = []string{keep}
	}
}
