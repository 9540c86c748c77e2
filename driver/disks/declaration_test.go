package disks

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseValid(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Declaration
	}{
		{
			name: "yaml by id glob on named nodes",
			in: `
volumeGroups:
- volumeGroup: fast
  nodes: [node-a, node-b]
  paths: ["/dev/disk/by-id/nvme-Samsung*", /dev/sdb]
`,
			want: Declaration{VolumeGroups: []VGDecl{{
				VG: "fast", Nodes: []string{"node-a", "node-b"},
				Paths: []string{"/dev/disk/by-id/nvme-Samsung*", "/dev/sdb"},
			}}},
		},
		{
			name: "yaml by size and model on labelled nodes",
			in: `
volumeGroups:
- volumeGroup: bulk
  nodeSelector: {example.com/disks: hdd, zone: a}
  minSize: 1Ti
  maxSize: 20Ti
  model: "ST*"
`,
			want: Declaration{VolumeGroups: []VGDecl{{
				VG: "bulk", NodeSelector: map[string]string{"example.com/disks": "hdd", "zone": "a"},
				MinSize: "1Ti", MaxSize: "20Ti", Model: "ST*",
			}}},
		},
		{
			name: "json, every node, empty lists read as absent",
			in:   `{"volumeGroups":[{"volumeGroup":"vg0","nodes":[],"nodeSelector":{},"paths":["/dev/vd[b-d]"]}]}`,
			want: Declaration{VolumeGroups: []VGDecl{{VG: "vg0", Paths: []string{"/dev/vd[b-d]"}}}},
		},
		{
			name: "same VG on disjoint node sets",
			in: `
volumeGroups:
- {volumeGroup: data, nodes: [a], paths: [/dev/sdb]}
- {volumeGroup: data, nodes: [b], model: "INTEL*"}
- {volumeGroup: data, nodeSelector: {tier: x}, minSize: "100Gi"}
`,
			want: Declaration{VolumeGroups: []VGDecl{
				{VG: "data", Nodes: []string{"a"}, Paths: []string{"/dev/sdb"}},
				{VG: "data", Nodes: []string{"b"}, Model: "INTEL*"},
				{VG: "data", NodeSelector: map[string]string{"tier": "x"}, MinSize: "100Gi"},
			}},
		},
		{name: "empty", in: ``, want: Declaration{}},
		{name: "min equals max", in: `{volumeGroups: [{volumeGroup: v, minSize: 1Gi, maxSize: "1073741824"}]}`,
			want: Declaration{VolumeGroups: []VGDecl{{VG: "v", MinSize: "1Gi", MaxSize: "1073741824"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string // substrings of the error
	}{
		{"bad VG name", `{volumeGroups: [{volumeGroup: "vg 0", paths: [/dev/sdb]}]}`,
			[]string{`volumeGroups[0].volumeGroup:`, `"vg 0"`}},
		{"empty VG name", `{volumeGroups: [{paths: [/dev/sdb]}]}`, []string{`volumeGroups[0].volumeGroup:`, "is empty"}},
		{"path outside /dev", `{volumeGroups: [{volumeGroup: v, paths: [/dev/sdb, /home/disk]}]}`,
			[]string{`volumeGroups[0].paths[1] "/home/disk": is not a path under /dev/`}},
		{"relative path", `{volumeGroups: [{volumeGroup: v, paths: [sdb]}]}`, []string{`paths[0] "sdb": is not a path under /dev/`}},
		{"bare /dev/", `{volumeGroups: [{volumeGroup: v, paths: [/dev/]}]}`, []string{`paths[0] "/dev/": is not a path under`}},
		{"dot dot", `{volumeGroups: [{volumeGroup: v}, {volumeGroup: w, paths: [/dev/../x]}]}`,
			[]string{`volumeGroups[1].paths[0] "/dev/../x": contains ".."`}},
		{"unclean", `{volumeGroups: [{volumeGroup: v, paths: [/dev//sdb]}]}`, []string{`"/dev//sdb": is not clean: write it "/dev/sdb"`}},
		{"blank in path", `{volumeGroups: [{volumeGroup: v, paths: ["/dev/disk/by-id/a b"]}]}`, []string{"blank or a control character"}},
		{"bad glob", `{volumeGroups: [{volumeGroup: v, paths: ["/dev/sd[b"]}]}`, []string{`paths[0] "/dev/sd[b": syntax error in pattern`}},
		{"bad model glob", `{volumeGroups: [{volumeGroup: v, model: "a\\"}]}`, []string{`volumeGroups[0].model "a\\": syntax error`}},
		{"no disk selector", `{volumeGroups: [{volumeGroup: v, nodes: [a]}]}`,
			[]string{"volumeGroups[0]: selects no disks: give paths, minSize, maxSize or model"}},
		{"bad quantity", `{volumeGroups: [{volumeGroup: v, minSize: 10GB}]}`, []string{`volumeGroups[0].minSize "10GB":`}},
		{"zero size", `{volumeGroups: [{volumeGroup: v, maxSize: "0"}]}`, []string{`maxSize "0": is not positive`}},
		{"negative size", `{volumeGroups: [{volumeGroup: v, minSize: "-1Gi"}]}`, []string{`minSize "-1Gi": is not positive`}},
		{"huge size", `{volumeGroups: [{volumeGroup: v, maxSize: "100Ei"}]}`, []string{`maxSize "100Ei": is too large`}},
		{"min over max", `{volumeGroups: [{volumeGroup: v, minSize: 2Ti, maxSize: 1Ti}]}`,
			[]string{"volumeGroups[0]: minSize 2Ti is more than maxSize 1Ti"}},
		{"bad label key", `{volumeGroups: [{volumeGroup: v, model: x, nodeSelector: {"-bad": y}}]}`,
			[]string{`volumeGroups[0].nodeSelector key "-bad":`}},
		{"bad label value", `{volumeGroups: [{volumeGroup: v, model: x, nodeSelector: {k: "a b"}}]}`,
			[]string{`volumeGroups[0].nodeSelector["k"] "a b":`}},
		{"bad node name", `{volumeGroups: [{volumeGroup: v, model: x, nodes: [Node_A]}]}`, []string{`volumeGroups[0].nodes[0] "Node_A":`}},
		{"node twice", `{volumeGroups: [{volumeGroup: v, model: x, nodes: [a, a]}]}`, []string{`nodes[1] "a": named twice`}},
		{"nodes and selector", `{volumeGroups: [{volumeGroup: v, model: x, nodes: [a], nodeSelector: {k: v}}]}`,
			[]string{"volumeGroups[0]: give nodes or nodeSelector, not both"}},
		{"unknown field", `{volumeGroups: [{volumeGroup: v, model: x, path: [/dev/sdb]}]}`, []string{`unknown field "path"`}},
		{"unknown top field", `{volumeGroup: v}`, []string{`unknown field "volumeGroup"`}},
		{"duplicate key", "volumeGroups:\n- volumeGroup: v\n  model: x\n  model: y\n", []string{`"model" already set`}},
		{"not yaml", `{volumeGroups: [`, []string{"invalid disk declaration"}},
		{"duplicate VG for every node", `{volumeGroups: [{volumeGroup: v, model: x}, {volumeGroup: v, paths: [/dev/sdb]}]}`,
			[]string{`volumeGroups[1].volumeGroup "v": declared again for nodes volumeGroups[0] already has (every node)`}},
		{"duplicate VG on a shared node", `{volumeGroups: [{volumeGroup: v, model: x, nodes: [a, b]}, {volumeGroup: w, model: x}, {volumeGroup: v, model: y, nodes: [c, b]}]}`,
			[]string{`volumeGroups[2].volumeGroup "v": declared again for nodes volumeGroups[0] already has (nodes c, b)`}},
		{"duplicate VG with one selector", `{volumeGroups: [{volumeGroup: v, model: x, nodeSelector: {a: "1"}}, {volumeGroup: v, model: y, nodeSelector: {a: "1"}}]}`,
			[]string{`volumeGroups[1].volumeGroup "v": declared again`, "nodes labelled a=1"}},
		{"every error at once", `{volumeGroups: [{volumeGroup: "-x", paths: [/etc/x]}]}`,
			[]string{"volumeGroups[0].volumeGroup:", `volumeGroups[0].paths[0] "/etc/x"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Parse([]byte(tc.in))
			if err == nil {
				t.Fatalf("accepted %+v", d)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestForNode(t *testing.T) {
	d := Declaration{VolumeGroups: []VGDecl{
		{VG: "all", Model: "x"},
		{VG: "named", Nodes: []string{"a", "b"}, Model: "x"},
		{VG: "labelled", NodeSelector: map[string]string{"disk": "ssd", "zone": "1"}, Model: "x"},
		{VG: "named2", Nodes: []string{"c"}, Model: "y"},
	}}
	for _, tc := range []struct {
		node   string
		labels map[string]string
		want   []string
	}{
		{"a", nil, []string{"all", "named"}},
		{"b", map[string]string{"disk": "ssd"}, []string{"all", "named"}},
		{"c", map[string]string{"disk": "ssd", "zone": "1", "other": "z"}, []string{"all", "labelled", "named2"}},
		{"d", map[string]string{"disk": "ssd", "zone": "2"}, []string{"all"}},
		{"e", map[string]string{"zone": "1"}, []string{"all"}},
	} {
		got, err := d.ForNode(tc.node, tc.labels)
		if err != nil {
			t.Fatalf("%s: %v", tc.node, err)
		}
		var names []string
		for _, v := range got {
			names = append(names, v.VG)
		}
		if !reflect.DeepEqual(names, tc.want) {
			t.Errorf("node %s %v: got %v, want %v", tc.node, tc.labels, names, tc.want)
		}
	}
}

func TestForNodeConflict(t *testing.T) {
	// Two selectors validation cannot tell apart: they overlap on a node
	// with both labels only.
	d, err := Parse([]byte(`
volumeGroups:
- {volumeGroup: data, nodeSelector: {ssd: "yes"}, model: "A*"}
- {volumeGroup: data, nodeSelector: {zone: b}, model: "B*"}
- {volumeGroup: data, nodes: [solo], minSize: 1Gi}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := d.ForNode("n1", map[string]string{"ssd": "yes"}); err != nil || len(got) != 1 || got[0].Model != "A*" {
		t.Fatalf("n1: %+v, %v", got, err)
	}
	_, err = d.ForNode("n2", map[string]string{"ssd": "yes", "zone": "b"})
	want := `node n2: volumeGroups[0] and volumeGroups[1] both declare volume group "data" (nodes labelled ssd=yes; nodes labelled zone=b)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want %q", err, want)
	}
	_, err = d.ForNode("solo", map[string]string{"zone": "b"})
	if err == nil || !strings.Contains(err.Error(), "volumeGroups[1] and volumeGroups[2]") {
		t.Fatalf("solo: got %v", err)
	}
}
