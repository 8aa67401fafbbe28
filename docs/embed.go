// Package docs is Herald's documentation. The API reference, openapi.yaml, is embedded from here, so the
// ingress serves the very file this directory holds (GET /v1/openapi.yaml): one source, no copy.
package docs

import _ "embed"

// OpenAPI is openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
