package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestLVMEnvDisablesUdevOnlyWithoutIt(t *testing.T) {
	dir := t.TempDir()
	control := filepath.Join(dir, "control")
	if env := lvmEnv(control); !slices.Contains(env, "DM_DISABLE_UDEV=1") {
		t.Errorf("no udev control socket: env %v lacks DM_DISABLE_UDEV=1", env)
	}
	if err := os.WriteFile(control, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if env := lvmEnv(control); slices.Contains(env, "DM_DISABLE_UDEV=1") {
		t.Errorf("udev running: env %v must leave udev on", env)
	}
	if env := lvmEnv(control); !slices.Contains(env, "LVM_SUPPRESS_FD_WARNINGS=1") {
		t.Errorf("env %v lacks LVM_SUPPRESS_FD_WARNINGS=1", env)
	}
}
