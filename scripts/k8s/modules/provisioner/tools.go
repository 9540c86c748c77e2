//go:build tools

// Package tools keeps csi-provisioner in go.mod, so that go mod tidy keeps
// its dependencies.
package tools

import (
	_ "github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner"
)
