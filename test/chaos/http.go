package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// control is the client of the harness's own calls (setup, the simulator's control API, metrics): short
// timeouts, so a hung component shows up as an error rather than a stuck test.
var control = &http.Client{Timeout: 10 * time.Second}

func get(ctx context.Context, url string) (int, []byte, error) {
	return do(ctx, http.MethodGet, url, "", nil)
}

// do sends a request with an optional JSON body and bearer key and returns the status and the body.
func do(ctx context.Context, method, url, key string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return 0, nil, err
	}
	if body != nil || method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json") // the simulator's DELETE /sim/faults too
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := control.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// doJSON is do that wants status want and decodes the answer into out (when not nil).
func doJSON(ctx context.Context, method, url, key string, body any, want int, out any) error {
	status, b, err := do(ctx, method, url, key, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, url, err)
	}
	if status != want {
		return fmt.Errorf("%s %s: status %d, want %d: %s", method, url, status, want, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: %w", method, url, err)
		}
	}
	return nil
}
