package updates_test

import (
	"testing"

	"github.com/heraldhq/herald/internal/testing/openapitest"
	"github.com/heraldhq/herald/internal/updates"
)

// TestWebhookResponsesMatchTheOpenAPIDocument validates real webhook answers against docs/openapi.yaml.
func TestWebhookResponsesMatchTheOpenAPIDocument(t *testing.T) {
	t.Parallel()
	doc := openapitest.Load(t)
	e := newEnv(t)
	cases := []struct {
		name    string
		body    any
		headers []string
		status  int
	}{
		{"handled", textUpdate(e.updateID(), 501, "/start"), nil, 200},
		{"ignored kind", map[string]any{"update_id": e.updateID(), "edited_message": map[string]any{}}, nil, 200},
		{"malformed", `{"update_id": "x"}`, nil, 400},
		{"no secret", textUpdate(e.updateID(), 501, "/start"), []string{}, 401},
		{"wrong secret", textUpdate(e.updateID(), 501, "/start"), []string{updates.PlatformSecretHeader, "nope"}, 401},
	}
	for _, c := range cases {
		r := e.post(c.body, c.headers...)
		if r.status != c.status {
			t.Fatalf("%s: status %d, want %d: %s", c.name, r.status, c.status, r.body)
		}
		if err := doc.ValidateResponse("POST", updates.Path, r.status, r.contentType, r.body); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
