package ingress

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/heraldhq/herald/docs"
)

// openAPIETag names the embedded document's content, so a client revalidates with If-None-Match for a 304.
var openAPIETag = func() string {
	sum := sha256.Sum256(docs.OpenAPI)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}()

// serveOpenAPI is GET /v1/openapi.yaml: docs/openapi.yaml as built into this binary. It needs no key (it
// describes the API and holds no tenant's data) and may be cached; any origin may read it, so that API
// tools in a browser can load it.
func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/yaml")
	h.Set("Cache-Control", "public, max-age=300")
	h.Set("ETag", openAPIETag)
	h.Set("Access-Control-Allow-Origin", "*")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(docs.OpenAPI))
}
