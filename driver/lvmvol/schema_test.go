package lvmvol_test

import (
	"fmt"
	"os"
	"testing"

	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/test/lvmfake"
)

// TestMain has the fake lvm2 vet every tag the tests' Managers write
// against the tag schema (tags.go): a tag written in any path a test
// takes that the schema does not list fails the package, even one whose
// write error the code only logs (a progress record).
func TestMain(m *testing.M) {
	lvmfake.CheckTag = lvmvol.InSchema
	code := m.Run()
	if refused := lvmfake.Refused(); len(refused) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: tags written that the schema (driver/lvmvol/tags.go) does not list: %v\n", refused)
		code = 1
	}
	os.Exit(code)
}
