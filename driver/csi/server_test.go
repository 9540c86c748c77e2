package csi

import "testing"

// TestSocketPath: the one reading of an endpoint flag, for the socket
// served and the one told to kubelet. A unix URL or a bare absolute path
// is a socket's file, cleaned; anything a socket could not be, or whose
// part would be lost, is refused.
func TestSocketPath(t *testing.T) {
	for _, c := range []struct {
		endpoint, want string // want "": refused
	}{
		{"unix:///csi/csi.sock", "/csi/csi.sock"},
		{"unix:/csi/csi.sock", "/csi/csi.sock"},
		{"UNIX:///csi/csi.sock", "/csi/csi.sock"},
		{"/csi/csi.sock", "/csi/csi.sock"},
		{"unix:///var/lib/kubelet/plugins/x/../lvm.carve.dev/csi.sock", "/var/lib/kubelet/plugins/lvm.carve.dev/csi.sock"},
		{"/csi//csi.sock", "/csi/csi.sock"},
		{"/run/50%/csi.sock", "/run/50%/csi.sock"},  // a bare path is no URL: no escapes
		{"unix:///run/a%20b.sock", "/run/a b.sock"}, // a URL's escapes are read
		{"", ""},
		{"csi.sock", ""},
		{"./csi/csi.sock", ""},
		{"unix:csi.sock", ""},
		{"unix://csi.sock", ""}, // csi.sock is the URL's host
		{"unix://host/csi.sock", ""},
		{"unix://", ""},
		{"unix:///", ""},
		{"/", ""},
		{"unix:///csi.sock?x=1", ""},
		{"unix:///csi.sock#x", ""},
		{"tcp://127.0.0.1:10000", ""},
		{"http://x/csi.sock", ""},
		{"127.0.0.1:10000", ""},
		{"unix:///bad%zz", ""},
	} {
		got, err := SocketPath(c.endpoint)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("SocketPath(%q) = %q, want refused", c.endpoint, got)
		case c.want != "" && err != nil:
			t.Errorf("SocketPath(%q) refused: %v, want %q", c.endpoint, err, c.want)
		case got != c.want:
			t.Errorf("SocketPath(%q) = %q, want %q", c.endpoint, got, c.want)
		}
	}
}
