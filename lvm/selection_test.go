package lvm

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"carve.dev/carve/lvm/runner"
)

// The selection print moves with each change lvm2 would read in its
// system dir, and only with those.
func TestSelectionPrintMovesWithWhatLVMReads(t *testing.T) {
	dir := t.TempDir()
	last := selectionPrint(dir)
	step := func(what string, change func(), moves bool) {
		t.Helper()
		change()
		p := selectionPrint(dir)
		if (p != last) != moves {
			t.Errorf("%s: print %q, before %q; want moved %t", what, p, last, moves)
		}
		last = p
	}
	write := func(name, content string) func() {
		return func() {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	// lvmdevices' way: a new file renamed over the old one.
	replace := func(content string) func() {
		return func() {
			write("devices/system.devices_new", content)()
			if err := os.Rename(filepath.Join(dir, "devices/system.devices_new"), filepath.Join(dir, "devices/system.devices")); err != nil {
				t.Fatal(err)
			}
		}
	}
	mkdir := func(name string) func() {
		return func() {
			if err := os.MkdirAll(filepath.Join(dir, name), 0o700); err != nil {
				t.Fatal(err)
			}
		}
	}
	step("nothing changed", func() {}, false)
	step("an empty lvm.conf where there was none", write("lvm.conf", ""), true)
	step("lvmlocal.conf written", write("lvmlocal.conf", "devices {\n\tuse_devicesfile = 1\n}\n"), true)
	step("the devices dir made", mkdir("devices"), true)
	step("the devices file made", replace("VERSION=1.1.1\nIDTYPE=devname IDNAME=/dev/vda DEVNAME=/dev/vda PVID=x\n"), true)
	step("nothing changed", func() {}, false)
	step("lvmdevices --deldev", replace("VERSION=1.1.2\n"), true)
	step("the same content written anew", replace("VERSION=1.1.2\n"), true)
	step("a backup of the devices file", func() {
		mkdir("devices/backup")()
		write("devices/backup/system.devices-20250101.000000.0001", "VERSION=1.1.1\n")()
	}, false)
	later := time.Now().Add(time.Hour)
	step("lvm.conf's mtime", func() {
		if err := os.Chtimes(filepath.Join(dir, "lvm.conf"), later, later); err != nil {
			t.Fatal(err)
		}
	}, true)
	step("lvmlocal.conf removed", func() { _ = os.Remove(filepath.Join(dir, "lvmlocal.conf")) }, true)
	step("the devices dir removed", func() { _ = os.RemoveAll(filepath.Join(dir, "devices")) }, true)
}

// The Cache reads the system dir its Client's lvm2 reads.
func TestSystemDirIsTheOneLVMReads(t *testing.T) {
	t.Setenv("LVM_SYSTEM_DIR", "/from/the/process")
	if d := New(runner.New(0, "LVM_SYSTEM_DIR=/private")).systemDir(); d != "/private" {
		t.Errorf("a runner's LVM_SYSTEM_DIR: %q", d)
	}
	fake := New(&reportRunner{t: t, ran: map[string]int{}})
	if d := fake.systemDir(); d != "/from/the/process" {
		t.Errorf("a runner that does not say: %q, want this process's", d)
	}
	t.Setenv("LVM_SYSTEM_DIR", "")
	if d := fake.systemDir(); d != defaultSystemDir {
		t.Errorf("none set: %q, want %q", d, defaultSystemDir)
	}
}
