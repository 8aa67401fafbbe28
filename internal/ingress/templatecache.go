package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/template"
)

// The template cache: a send names a template, and looking it up in PostgreSQL would add a round trip to
// every send. Two maps, because the two questions a send asks change at different rates:
//
//   - a version's content never changes: (tenant, name, version) names one content forever (versions are
//     never reused, also across a deletion: store.SaveTemplate), so parsed versions are kept without expiry
//     (up to maxCachedVersions, then the map starts over);
//   - which version is the latest, and whether the name is deleted, changes on a save or a delete, possibly
//     on another replica. This replica updates it at once for its own saves and deletes, and trusts what it
//     read for TemplateHeadTTL: a save or delete through another replica reaches this one's sends at most
//     that long after. A send naming an explicit version asks the same question (a deleted template's
//     versions are gone), so it costs no more.
//
// So a replica asks PostgreSQL at most once per TemplateHeadTTL per template it sends with, plus once per
// version it has not parsed yet, whatever the send rate. Listening for changes (LISTEN/NOTIFY) would make
// the window shorter at the cost of a connection per replica held open and a reconnect path; one second is
// short next to how often templates are edited.
const (
	TemplateHeadTTL   = time.Second
	maxCachedVersions = 10_000
)

type templateKey struct {
	tenant, name string
	version      int
}

type templateHead struct {
	version int // 0: the name has no live template
	read    time.Time
}

type templateCache struct {
	st  *store.Store
	ttl time.Duration

	mu       sync.Mutex
	heads    map[templateKey]templateHead // version 0 in the key
	versions map[templateKey]*cachedTemplate
	queries  int // lookups in PostgreSQL, for tests
}

// cachedTemplate is a version: the row and its parsed locales.
type cachedTemplate struct {
	row store.Template
	set *template.Set
}

func newTemplateCache(st *store.Store, ttl time.Duration) *templateCache {
	return &templateCache{st: st, ttl: ttl, heads: map[templateKey]templateHead{}, versions: map[templateKey]*cachedTemplate{}}
}

// get returns a version of the tenant's template (version 0: the latest); apierror.TemplateNotFound when
// the name is unknown or deleted, or the version does not exist.
func (c *templateCache) get(ctx context.Context, tenant, name string, version int) (*cachedTemplate, error) {
	nameKey := templateKey{tenant, name, 0}
	c.mu.Lock()
	head, fresh := c.heads[nameKey]
	fresh = fresh && time.Since(head.read) < c.ttl
	c.mu.Unlock()
	if !fresh {
		// Read the latest version (with its content, which a send without a version needs anyway).
		t, err := c.load(ctx, tenant, name, 0)
		switch {
		case errors.Is(err, store.ErrNotFound):
			c.setHead(nameKey, 0)
			return nil, templateNotFound(name, version)
		case err != nil:
			return nil, err
		}
		c.setHead(nameKey, t.row.Version)
		head.version = t.row.Version
		if version == 0 || version == t.row.Version {
			return t, nil
		}
	}
	if head.version == 0 {
		return nil, templateNotFound(name, version)
	}
	if version == 0 {
		version = head.version
	}
	c.mu.Lock()
	t, ok := c.versions[templateKey{tenant, name, version}]
	c.mu.Unlock()
	if ok {
		return t, nil
	}
	t, err := c.load(ctx, tenant, name, version)
	if errors.Is(err, store.ErrNotFound) {
		return nil, templateNotFound(name, version)
	}
	return t, err
}

func templateNotFound(name string, version int) error {
	if version == 0 {
		return apierror.TemplateNotFound.With("no template %q", name)
	}
	return apierror.TemplateNotFound.With("no version %d of template %q", version, name)
}

// load reads a version from PostgreSQL, parses it and keeps it.
func (c *templateCache) load(ctx context.Context, tenant, name string, version int) (*cachedTemplate, error) {
	c.mu.Lock()
	c.queries++
	c.mu.Unlock()
	row, err := c.st.GetTemplate(ctx, tenant, name, version)
	if err != nil {
		return nil, err
	}
	t, err := compileRow(row)
	if err != nil {
		return nil, err
	}
	c.put(tenant, t)
	return t, nil
}

// put keeps a parsed version.
func (c *templateCache) put(tenant string, t *cachedTemplate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.versions) >= maxCachedVersions {
		c.versions = map[templateKey]*cachedTemplate{}
	}
	c.versions[templateKey{tenant, t.row.Name, t.row.Version}] = t
}

func (c *templateCache) setHead(k templateKey, version int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.heads) >= maxCachedVersions {
		c.heads = map[templateKey]templateHead{}
	}
	c.heads[k] = templateHead{version: version, read: time.Now()}
}

// saved records this replica's save (the latest is t) or delete (t nil) at once.
func (c *templateCache) saved(tenant, name string, t *cachedTemplate) {
	if t == nil {
		c.setHead(templateKey{tenant, name, 0}, 0)
		return
	}
	c.put(tenant, t)
	c.setHead(templateKey{tenant, name, 0}, t.row.Version)
}

// lookups counts the cache's reads of PostgreSQL.
func (c *templateCache) lookups() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queries
}

// localeSource is a locale as a template gives it.
type localeSource struct {
	Message *string           `json:"message"`
	Buttons *[][]buttonSource `json:"buttons"`
}

type buttonSource struct {
	Text *string `json:"text"`
	URL  *string `json:"url"`
}

// compileRow parses a stored version (valid when it was saved).
func compileRow(row store.Template) (*cachedTemplate, error) {
	var locales map[string]localeSource
	if err := json.Unmarshal(row.Locales, &locales); err != nil {
		return nil, fmt.Errorf("while reading template %q version %d: %w", row.Name, row.Version, err)
	}
	set, err := template.Compile(row.Format == notification.FormatHTML, row.DefaultLocale, sources(locales))
	if err != nil {
		return nil, fmt.Errorf("while parsing template %q version %d: %w", row.Name, row.Version, err)
	}
	return &cachedTemplate{row: row, set: set}, nil
}

// sources are the template package's view of the locales (absent fields empty).
func sources(locales map[string]localeSource) map[string]template.LocaleSource {
	out := make(map[string]template.LocaleSource, len(locales))
	for tag, l := range locales {
		var s template.LocaleSource
		if l.Message != nil {
			s.Message = *l.Message
		}
		if l.Buttons != nil {
			for _, row := range *l.Buttons {
				r := make([]template.ButtonSource, len(row))
				for j, b := range row {
					if b.Text != nil {
						r[j].Text = *b.Text
					}
					if b.URL != nil {
						r[j].URL = *b.URL
					}
				}
				s.Buttons = append(s.Buttons, r)
			}
		}
		out[tag] = s
	}
	return out
}
