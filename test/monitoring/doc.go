// Package monitoring holds the tests of Herald's Grafana dashboard and Prometheus rules, which the Helm chart
// ships from charts/herald/files (dashboards/herald.json, rules/herald-rules.yaml; both off by default).
// promtool checks every PromQL expression of the dashboard and of the rules and runs the alerts' unit tests
// (testdata/herald-rules.test.yaml); a running Herald (herald dev, and the operator against envtest) must
// export every metric they name; every alert must have its runbook section in docs/operations.md. It has no
// code of its own.
//
// The tests need promtool (Debian: apt-get install prometheus), the PostgreSQL server binaries and
// envtest's kube-apiserver and etcd (KUBEBUILDER_ASSETS, see hack/envtest.sh); without them they fail
// rather than skip.
package monitoring
