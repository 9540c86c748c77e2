package testenv

import (
	"os/exec"
	"strings"
	"testing"

	"carve.dev/carve/driver/mapper"
)

// Layers lists the device-mapper devices that are Carve's layers over
// vg's volumes (driver/mapper: VG-LV-carve).
func Layers(t *testing.T, vg string) []string {
	t.Helper()
	out, err := exec.Command("dmsetup", "ls").Output()
	if err != nil {
		t.Fatalf("dmsetup ls: %v", err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			if gvg, _, ok := mapper.VolumeOf(f[0], mapper.LinearLayer); ok && gvg == vg {
				names = append(names, f[0])
			}
		}
	}
	return names
}
