//go:build tools

// Package tools pins the source of binaries built for tests.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
