// Package kubetest gives a test binary a real Kubernetes API server: envtest's kube-apiserver and etcd,
// with Herald's CRDs (config/crd/bases), started once for the binary; and runs the operator in a test as
// `herald operator` would.
//
//	func TestMain(m *testing.M) {
//		os.Exit(kubetest.Run(m, func(cfg *rest.Config, c client.Client) { restConfig, k8s = cfg, c }))
//	}
package kubetest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/heraldhq/herald/internal/operator"
	"github.com/heraldhq/herald/internal/testing/background"
	"github.com/heraldhq/herald/internal/testing/pgtest"
	"github.com/heraldhq/herald/internal/testing/reporoot"
)

// Run starts the API server, hands ready its config and an uncached client of it (what kubectl would see),
// runs the tests with pgtest.Run (so that a test may have a database of its own) and stops the server. It
// returns the exit code for TestMain; without kube-apiserver and etcd it says how to get them.
func Run(m *testing.M, ready func(cfg *rest.Config, k8s client.Client)) int {
	root, err := reporoot.Find()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		// The binaries hack/envtest.sh builds, when a developer runs go test by hand.
		dir := filepath.Join(root, "bin", "k8s")
		if !exists(filepath.Join(dir, "kube-apiserver")) || !exists(filepath.Join(dir, "etcd")) {
			fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set and ./bin/k8s has no kube-apiserver and etcd: "+
				"run `make envtest` (hack/envtest.sh) first, or set KUBEBUILDER_ASSETS=$(hack/envtest.sh | tail -n 1)")
			return 1
		}
		_ = os.Setenv("KUBEBUILDER_ASSETS", dir)
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join(root, "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting envtest (KUBEBUILDER_ASSETS=%s): %v\n", os.Getenv("KUBEBUILDER_ASSETS"), err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	k8s, err := client.New(cfg, client.Options{Scheme: operator.Scheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ready(cfg, k8s)
	return pgtest.Run(m)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// StartOperator runs operator.Run with opts (the API server is opts.RestConfig's) as `herald operator`
// would, logging nowhere, and stops it at the end of the test.
func StartOperator(t testing.TB, opts operator.Options) {
	t.Helper()
	opts.Logger = logr.FromSlogHandler(slog.DiscardHandler)
	opts.SkipControllerNameValidation = true
	background.Start(t, "the operator", 30*time.Second, func(ctx context.Context) error { return operator.Run(ctx, opts) })
}
