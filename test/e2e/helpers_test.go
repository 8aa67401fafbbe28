package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// env is what hack/e2e/up.sh wrote to bin/e2e/env: where the cluster, the tools and the host services are.
type env struct {
	vars map[string]string
}

func loadEnv(t *testing.T) *env {
	path := os.Getenv("HERALD_E2E_ENV")
	if path == "" {
		t.Skip("HERALD_E2E_ENV is not set: the end-to-end test runs on the cluster of hack/e2e/up.sh (make test-e2e)")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("HERALD_E2E_ENV: %v", err)
	}
	defer f.Close()
	e := &env{vars: map[string]string{}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			e.vars[k] = v
		}
	}
	for _, k := range []string{"KUBECONFIG", "HERALD_E2E_KUBECTL", "HERALD_E2E_HELM", "HERALD_E2E_CHART",
		"HERALD_E2E_DATABASE_URL", "HERALD_E2E_KAFKA_BROKERS", "HERALD_E2E_SIM_SERVICE_IP", "HERALD_E2E_PUBLIC_SERVICE_IP",
		"HERALD_E2E_IMAGE_REPOSITORY", "HERALD_E2E_IMAGE_TAGS", "HERALD_E2E_LOGS"} {
		if e.vars[k] == "" {
			t.Fatalf("%s: %s is missing", path, k)
		}
	}
	return e
}

func (e *env) get(k string) string { return e.vars[k] }

// run runs a command with the cluster's KUBECONFIG and returns its stdout; it fails the test when the
// command fails.
func (e *env) run(t *testing.T, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	out, err := e.try(timeout, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v", filepath.Base(name), strings.Join(args, " "), err)
	}
	return out
}

// try runs a command and returns its stdout, or an error carrying its stderr.
func (e *env) try(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.get("KUBECONFIG"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w\n%s%s", err, stderr.String(), stdout.String())
	}
	return stdout.String(), nil
}

func (e *env) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	return e.run(t, 3*time.Minute, e.get("HERALD_E2E_KUBECTL"), args...)
}

func (e *env) helm(t *testing.T, args ...string) string {
	t.Helper()
	return e.run(t, 8*time.Minute, e.get("HERALD_E2E_HELM"), args...)
}

// kubectlApply applies a manifest given on stdin.
func (e *env) kubectlApply(t *testing.T, manifest string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.get("HERALD_E2E_KUBECTL"), "apply", "-f", "-")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.get("KUBECONFIG"))
	cmd.Stdin = strings.NewReader(manifest)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}

// getJSON runs kubectl get … -o json into v.
func (e *env) getJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out := e.kubectl(t, append(append([]string{"get"}, args...), "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("kubectl get %s: %v", strings.Join(args, " "), err)
	}
}

// api is a JSON HTTP client of one base URL, with an optional bearer key.
type api struct {
	base   string
	key    string
	client *http.Client
}

func newAPI(base, key string) *api {
	return &api{base: base, key: key, client: &http.Client{Timeout: 15 * time.Second}}
}

// call sends a request with a JSON body (nil: none) and decodes a JSON answer into out (nil: ignored).
func (a *api) call(method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil || method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json") // the simulator refuses anything else that changes state
	}
	if a.key != "" {
		req.Header.Set("Authorization", "Bearer "+a.key)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && len(raw) > 0 && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w: %s", method, path, err, raw)
		}
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(raw))
	}
	return resp.StatusCode, nil
}

// must is call that fails the test unless the answer has status want.
func (a *api) must(t *testing.T, want int, method, path string, body, out any) {
	t.Helper()
	status, err := a.call(method, path, body, out)
	if status != want {
		t.Fatalf("%s %s: want %d, got %d (%v)", method, path, want, status, err)
	}
}
