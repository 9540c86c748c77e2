package testenv

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"carve.dev/carve/driver/mapper"
)

// Layers lists the device-mapper devices that are Carve's layers over
// vg's volumes (driver/mapper: VG-LV-carve).
func Layers(t *testing.T, vg string) []string {
	t.Helper()
	names, err := layers(vg)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func layers(vg string) ([]string, error) {
	out, err := exec.Command("dmsetup", "ls").Output()
	if err != nil {
		return nil, fmt.Errorf("dmsetup ls: %w", err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			if gvg, _, ok := mapper.VolumeOf(f[0], mapper.LinearLayer); ok && gvg == vg {
				names = append(names, f[0])
			}
		}
	}
	return names, nil
}

// CloseMappings removes the layers of vg's staged volumes (VG-LV-carve)
// and closes the dm-crypt mappings of its encrypted ones (VG-LV-crypt):
// what a carve stopped in the middle of a call, or a test that failed
// before its unstage, leaves holding the VG's LVs open, so that neither
// the next step nor the VG's removal could go on. It goes on past a
// mapping it cannot remove and returns every failure.
func CloseMappings(vg string) error {
	names, err := layers(vg)
	errs := []error{err}
	for _, name := range names {
		if out, err := exec.Command("dmsetup", "remove", name).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("dmsetup remove %s: %w: %s", name, err, out))
		}
	}
	out, err := exec.Command("dmsetup", "ls", "--target", "crypt").Output()
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("dmsetup ls --target crypt: %w", err))...)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], vg+"-") {
			if out, err := exec.Command("cryptsetup", "close", f[0]).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("cryptsetup close %s: %w: %s", f[0], err, out))
			}
		}
	}
	return errors.Join(errs...)
}
