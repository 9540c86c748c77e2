package nodefs

import (
	"errors"
	"regexp"
	"strings"
)

// seLinuxOptions are the mount options that give a mount its SELinux
// labels (selinux(8), mount(8)). Kubelet passes `context` in the mount
// flags of NodeStageVolume and NodePublishVolume when the CSIDriver says
// seLinuxMount: true and the pod has an SELinux label, so that the volume
// is mounted with the pod's label instead of relabelled file by file.
var seLinuxOptions = []string{"context", "fscontext", "defcontext", "rootcontext"}

// seLinuxLabel is an SELinux security context: user:role:type, then, on a
// policy with MLS or MCS, a range: a level or low-high, each level a
// sensitivity (s0) and optional categories (c1,c2 or c0.c1023). Names are
// letters, digits, "_", "." and "-".
var seLinuxLabel = regexp.MustCompile(`^` + seName + `:` + seName + `:` + seName +
	`(:` + seLevel + `(-` + seLevel + `)?)?$`)

const (
	seName     = `[A-Za-z0-9_][A-Za-z0-9_.-]*`
	seCategory = `c[0-9]+(\.c[0-9]+)?`
	seLevel    = `s[0-9]+(:` + seCategory + `(,` + seCategory + `)*)?`
)

// checkSELinuxValue checks the value of an SELinux option. A label with
// categories holds commas, which mount(8) would read as option
// separators; kubelet and libselinux therefore write it in double quotes
// (context="system_u:object_r:container_file_t:s0:c1,c2"), and libmount
// and the kernel read a quoted value as one. So a value with a comma must
// be quoted, quotes are allowed only around the whole value, and what is
// inside is a label and nothing else: no second option can ride in.
func checkSELinuxValue(value string) error {
	label := value
	if strings.HasPrefix(value, `"`) {
		if len(value) < 2 || !strings.HasSuffix(value, `"`) {
			return errors.New(`an SELinux label opened with " must end with it`)
		}
		label = value[1 : len(value)-1]
	} else if strings.Contains(value, ",") {
		return errors.New(`an SELinux label with categories (a comma) must be in double quotes, as kubelet writes it`)
	}
	if !seLinuxLabel.MatchString(label) {
		return errors.New("not an SELinux label (user:role:type, then an optional range such as s0:c1,c2)")
	}
	return nil
}
