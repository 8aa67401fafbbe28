//go:build tools

// Package tools pins the source of binaries built for tests: kube-apiserver
// for envtest, and the rest of a one-node cluster for the end-to-end test
// (hack/k8s-binaries.sh builds them all in one go build).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
