//go:build e2e

package e2e

import (
	"slices"
	"strconv"
	"strings"

	"carve.dev/carve/test/soakmodel"
)

// What lvm2 and the kernel say in each VM node, against the model's part
// on that node, and against what Carve reports of them.

// nodeOut runs argv on VM node node and returns its output; a failure
// fails the soak.
func (s *clusterSoak) nodeOut(node string, argv ...string) string {
	s.t.Helper()
	out, err := nodeVM(s.t, node).sh(argv...)
	if err != nil {
		s.t.Fatalf("on %s: %v", node, err)
	}
	return out
}

// soakVG is VG e2e of a VM node as lvm2 reports it.
type soakVG struct {
	free, extent int64
	pvFree       []int64 // sorted
	// poolSize, poolFree: the thin pool's data space, and its free part
	// by lvs's data_percent (two decimals; -1 when the pool is inactive).
	poolSize, poolFree int64
}

// readVG reads VG e2e on node, its PVs and the thin pool in one exec.
func (s *clusterSoak) readVG(node string) soakVG {
	out := s.nodeOut(node, "sh", "-c", `set -e
o="--noheadings --units b --nosuffix"
vgs $o -o vg_free,vg_extent_size e2e
echo --
pvs $o -o pv_free -S vg_name=e2e
echo --
lvs $o -o lv_size,data_percent e2e/thinpool`)
	parts := strings.Split(out, "--\n")
	if len(parts) != 3 {
		s.t.Fatalf("VG e2e's report on %s: %q", node, out)
	}
	vg := soakVG{}
	f := numbers(s, parts[0])
	if len(f) != 2 {
		s.t.Fatalf("vgs: %q", parts[0])
	}
	vg.free, vg.extent = int64(f[0]), int64(f[1])
	for _, n := range numbers(s, parts[1]) {
		vg.pvFree = append(vg.pvFree, int64(n))
	}
	slices.Sort(vg.pvFree)
	p := numbers(s, parts[2])
	switch len(p) {
	case 1: // an inactive pool reports no usage
		vg.poolSize, vg.poolFree = int64(p[0]), -1
	case 2:
		vg.poolSize = int64(p[0])
		vg.poolFree = vg.poolSize - int64(p[0]*p[1]/100)
	default:
		s.t.Fatalf("lvs of the thin pool: %q", parts[2])
	}
	return vg
}

func numbers(s *clusterSoak, out string) []float64 {
	var ns []float64
	for _, f := range strings.Fields(out) {
		n, err := strconv.ParseFloat(f, 64)
		if err != nil {
			s.t.Fatalf("a number in %q: %v", out, err)
		}
		ns = append(ns, n)
	}
	return ns
}

// soakLV is an LV of VG e2e: lvs reports a line per segment, and an
// expanded LV may have several.
type soakLV struct {
	name, segtypes string // segtypes: its segments', joined by "+"
	size           int64
	active         bool
}

func (s *clusterSoak) readLVs(node string) []soakLV {
	out := s.nodeOut(node, "lvs", "--noheadings", "--units", "b", "--nosuffix", "--separator", ",",
		"-o", "lv_name,lv_size,lv_active,segtype", "e2e")
	var lvs []soakLV
	for _, line := range nonEmptyLines(out) {
		f := strings.Split(line, ",")
		size, err := strconv.ParseInt(strings.TrimSpace(f[min(1, len(f)-1)]), 10, 64)
		if len(f) != 4 || err != nil {
			s.t.Fatalf("lvs: %q", line)
		}
		name, seg := strings.TrimSpace(f[0]), strings.TrimSpace(f[3])
		if n := len(lvs); n > 0 && lvs[n-1].name == name {
			if !strings.Contains("+"+lvs[n-1].segtypes+"+", "+"+seg+"+") {
				lvs[n-1].segtypes += "+" + seg
			}
			continue
		}
		lvs = append(lvs, soakLV{name: name, segtypes: seg, size: size, active: strings.TrimSpace(f[2]) == "active"})
	}
	return lvs
}

// checkLVs: VG e2e on node holds the LVs it held before the soak, the
// model's volumes there (size, layout, active exactly while attached) and
// snapshots (inactive), and nothing else: no leaked volume, snapshot,
// frozen point, nor a move's or a transfer's leftover.
func (s *clusterSoak) checkLVs(node string, extent int64) {
	got := map[string]soakmodel.LVState{}
	for _, l := range s.readLVs(node) {
		if s.base[node].lvs[l.name] {
			continue
		}
		got[l.name] = soakmodel.LVState{Segtype: l.segtypes, Size: l.size, Active: l.active}
	}
	soakmodel.Same(s.verdicts, "LVs of VG e2e on "+node+" (layout, size, activation)", got, s.model.On(node).WantLVs(extent))
	s.stats.Checked("LVs as the model")
}

// checkMounts: the CSI mounts in VM node node are the staging and publish
// paths of the model's running writers there, each mounted once.
func (s *clusterSoak) checkMounts(node string) {
	want := map[string]int{}
	for _, c := range s.model.On(node).Volumes {
		if c.pod != nil {
			want[stagingPath(c.ID)], want[publishPath(c.pod, c.LV)] = 1, 1
		}
	}
	got := map[string]int{}
	for _, l := range nonEmptyLines(s.nodeOut(node, "cat", "/proc/self/mountinfo")) {
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		p := f[4]
		if strings.HasPrefix(p, "/var/lib/kubelet/plugins/kubernetes.io/csi/"+driverName+"/") ||
			(strings.HasPrefix(p, "/var/lib/kubelet/pods/") && strings.Contains(p, "/volumes/kubernetes.io~csi/")) {
			got[p]++
		}
	}
	soakmodel.Same(s.verdicts, "CSI mounts in "+node+" (path: times mounted)", got, want)
	s.stats.Checked("mounts as the model")
}
