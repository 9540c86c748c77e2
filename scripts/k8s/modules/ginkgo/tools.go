//go:build tools

// Package tools keeps the ginkgo CLI in go.mod, so that go mod tidy keeps
// its dependencies.
package tools

import (
	_ "github.com/onsi/ginkgo/v2/ginkgo"
)
