package lvmvol

// frozenName is the LV name of the short-lived COW snapshot that freezes a
// thick volume while its data is copied (see snapshot.go).
func frozenName(target string) string { return target + "-frz" }
