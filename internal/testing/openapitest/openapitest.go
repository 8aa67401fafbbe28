// Package openapitest checks real HTTP responses against docs/openapi.yaml, so the API reference cannot
// drift from what the router answers. It resolves an operation's response schema (following $ref to
// components/responses) and validates bodies with a JSON Schema 2020-12 validator, the dialect of
// OpenAPI 3.1 schema objects.
package openapitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"
)

// Doc is a loaded OpenAPI document.
type Doc struct {
	raw      map[string]any
	compiler *jsonschema.Compiler
	mu       sync.Mutex
	cache    map[string]*jsonschema.Schema
	// Seen records every (method, path, status) validated, for coverage checks.
	Seen map[string]bool
}

// Load reads docs/openapi.yaml from the repository root.
func Load(t testing.TB) *Doc {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "..", "docs", "openapi.yaml")
	y, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("openapitest: %v", err)
	}
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		t.Fatalf("openapitest: %s is not valid YAML: %v", path, err)
	}
	var raw map[string]any
	if err := json.Unmarshal(j, &raw); err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("openapi.json", doc); err != nil {
		t.Fatal(err)
	}
	return &Doc{raw: raw, compiler: c, cache: map[string]*jsonschema.Schema{}, Seen: map[string]bool{}}
}

// Operations lists "METHOD path" of every operation in the document.
func (d *Doc) Operations() []string {
	var out []string
	for path, item := range d.raw["paths"].(map[string]any) {
		for method := range item.(map[string]any) {
			out = append(out, strings.ToUpper(method)+" "+path)
		}
	}
	return out
}

// HasRequestBody reports whether the document gives the operation a request body.
func (d *Doc) HasRequestBody(method, path string) bool {
	_, ok := lookup(d.raw, "paths", path, strings.ToLower(method), "requestBody")
	return ok
}

// ValidateResponse checks that the document declares status for the operation and that body matches
// its schema. path is the OpenAPI path template (for example /v1/status/{tracking_id}).
func (d *Doc) ValidateResponse(method, path string, status int, contentType string, body []byte) error {
	method = strings.ToLower(method)
	op, ok := lookup(d.raw, "paths", path, method)
	if !ok {
		return fmt.Errorf("%s %s is not in the OpenAPI document", strings.ToUpper(method), path)
	}
	d.mu.Lock()
	d.Seen[fmt.Sprintf("%s %s %d", strings.ToUpper(method), path, status)] = true
	d.mu.Unlock()
	resp, ok := lookup(op, "responses", strconv.Itoa(status))
	if !ok {
		return fmt.Errorf("%s %s: status %d is not documented", strings.ToUpper(method), path, status)
	}
	pointer := "#/paths/" + escape(path) + "/" + method + "/responses/" + strconv.Itoa(status)
	if ref, ok := resp.(map[string]any)["$ref"].(string); ok {
		pointer = ref
		resp, _ = lookup(d.raw, strings.Split(strings.TrimPrefix(ref, "#/"), "/")...)
	}
	if _, ok := lookup(resp, "content", "application/json", "schema"); !ok {
		if len(bytes.TrimSpace(body)) == 0 {
			return nil
		}
		// A body that is not JSON (the document itself, as YAML): its media type must be declared.
		content, _ := lookup(resp, "content")
		media, _ := content.(map[string]any)
		for mediaType := range media {
			if strings.HasPrefix(contentType, mediaType) {
				return nil
			}
		}
		return fmt.Errorf("%s %s %d: the document declares no %q body", strings.ToUpper(method), path, status, contentType)
	}
	if !strings.HasPrefix(contentType, "application/json") {
		return fmt.Errorf("%s %s %d: Content-Type %q, documented application/json", strings.ToUpper(method), path, status, contentType)
	}
	schema, err := d.schema(pointer + "/content/application~1json/schema")
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s %s %d: body is not JSON: %w", strings.ToUpper(method), path, status, err)
	}
	if err := schema.Validate(inst); err != nil {
		return fmt.Errorf("%s %s %d: body %s does not match the document: %w", strings.ToUpper(method), path, status, body, err)
	}
	return nil
}

// ValidateWebhook checks the body of a request Herald sends (a status callback) against the request body
// schema of the document's webhook name.
func (d *Doc) ValidateWebhook(name string, body []byte) error {
	if _, ok := lookup(d.raw, "webhooks", name, "post", "requestBody", "content", "application/json", "schema"); !ok {
		return fmt.Errorf("webhook %s is not in the OpenAPI document", name)
	}
	schema, err := d.schema("#/webhooks/" + escape(name) + "/post/requestBody/content/application~1json/schema")
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook %s: body is not JSON: %w", name, err)
	}
	if err := schema.Validate(inst); err != nil {
		return fmt.Errorf("webhook %s: body %s does not match the document: %w", name, body, err)
	}
	return nil
}

func (d *Doc) schema(pointer string) (*jsonschema.Schema, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.cache[pointer]; ok {
		return s, nil
	}
	s, err := d.compiler.Compile("openapi.json" + pointer)
	if err != nil {
		return nil, fmt.Errorf("compiling %s: %w", pointer, err)
	}
	d.cache[pointer] = s
	return s, nil
}

func escape(path string) string {
	return strings.ReplaceAll(strings.ReplaceAll(path, "~", "~0"), "/", "~1")
}

func lookup(v any, keys ...string) (any, bool) {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}
