// Package chart holds the tests of the Helm chart in charts/herald: lint, golden renders, server-side
// dry-run against a real API server, the flags and variables the chart passes against the binary, and the
// operator's RBAC against its kubebuilder markers. It has no code of its own.
//
// The tests need helm (HELM=<path>, or ./bin/helm) and envtest's kube-apiserver and etcd
// (KUBEBUILDER_ASSETS=<dir>, see hack/envtest.sh); without them they fail rather than skip. Run
// `go test ./test/chart/ -update` to rewrite the golden files after an intended change.
package chart
