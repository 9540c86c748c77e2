package lvm

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// privateConfig is an lvm.conf for tests and throw-away VMs: no udev (there
// is none in the test VM, and DM_DISABLE_UDEV alone does not stop lvm2 from
// waiting for it), no dmeventd monitoring (saves ~1.3 s per thin pool), no
// devices file, and every file lvm2 writes (locks, metadata backups and
// archives) kept under the private directory instead of /etc/lvm and /run.
const privateConfig = `# Written by carve's lvm.WritePrivateConfig: a private LVM configuration.
global {
	locking_dir = "{{dir}}/lock"
	use_lvmlockd = 0
	event_activation = 0
}
activation {
	udev_sync = 0
	udev_rules = 0
	verify_udev_operations = 0
	monitoring = 0
}
devices {
	obtain_device_list_from_udev = 0
	external_device_info_source = "none"
	use_devicesfile = 0
{{filter}}}
backup {
	backup = 1
	backup_dir = "{{dir}}/backup"
	archive = 1
	archive_dir = "{{dir}}/archive"
	retain_min = 2
	retain_days = 0
}
log {
	syslog = 0
}
config {
	# lvm2's own command profiles (the lvm2 shells' "lvmdbusd"), read
	# only: the private directory holds none.
	profile_dir = "/etc/lvm/profile"
}
`

// WritePrivateConfig writes dir/lvm.conf (and the directories it names) and
// returns the environment that makes lvm2 use it instead of /etc/lvm; pass it
// to runner.New. dir must be absolute, since lvm2 reads it from the
// environment of commands that may run elsewhere.
//
// With only, lvm2 sees those devices and no other (a global_filter). A test
// on a machine's own kernel needs it: lvm2 scans every block device there,
// and a VG of the same name on someone else's loop device (another run's,
// left attached when it was killed) makes vgcreate refuse and every later
// call ambiguous.
func WritePrivateConfig(dir string, only ...string) ([]string, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("lvm private config: %q is not an absolute path", dir)
	}
	if strings.ContainsAny(dir, "\"\\\n") {
		return nil, fmt.Errorf("lvm private config: %q cannot be quoted in lvm.conf", dir)
	}
	filter, err := deviceFilter(only)
	if err != nil {
		return nil, err
	}
	for _, sub := range []string{"lock", "backup", "archive"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("lvm private config: %w", err)
		}
	}
	conf := strings.NewReplacer("{{dir}}", dir, "{{filter}}", filter).Replace(privateConfig)
	if err := os.WriteFile(filepath.Join(dir, "lvm.conf"), []byte(conf), 0o600); err != nil {
		return nil, fmt.Errorf("lvm private config: %w", err)
	}
	return []string{
		"LVM_SYSTEM_DIR=" + dir,
		"DM_DISABLE_UDEV=1",
		// Harmless when the caller is Go (it closes fds on exec), but keeps
		// lvm2 from warning about descriptors a test harness leaked to us.
		"LVM_SUPPRESS_FD_WARNINGS=1",
	}, nil
}

// devicePathRE is what deviceFilter takes: a path with no character that
// is special in a regular expression or in an lvm.conf string, so that it
// goes into the filter as it is.
var devicePathRE = regexp.MustCompile(`^/dev(/[A-Za-z0-9_-]+)+$`)

// deviceFilter is the global_filter line accepting exactly devs and
// rejecting everything else, or "" for no devs (lvm2's default: all).
func deviceFilter(devs []string) (string, error) {
	if len(devs) == 0 {
		return "", nil
	}
	var b strings.Builder
	b.WriteString("\tglobal_filter = [ ")
	for _, d := range devs {
		if !devicePathRE.MatchString(d) {
			return "", fmt.Errorf("lvm private config: device %q is not a plain /dev path", d)
		}
		fmt.Fprintf(&b, `"a|^%s$|", `, d)
	}
	b.WriteString(`"r|.*|" ]` + "\n")
	return b.String(), nil
}
