package ingress

// The templates of v1 extensions §12: the routes (PUT, GET, versions, list, DELETE, preview), and what a
// templated send does before validateSend — find the version (templatecache.go), choose the locale, render.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/batch"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/template"
)

// The limits of a template (§12).
const (
	MaxTemplateLocales     = 50
	MaxLocaleSourceBytes   = 16 << 10
	MaxTemplateDataBytes   = 32 << 10
	MaxTemplateBodyBytes   = MaxTemplateLocales*MaxLocaleSourceBytes + 64<<10 // every locale full, and the JSON around them
	DefaultTemplateListLim = 50
)

var localeTag = regexp.MustCompile(`^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})*$`)

// validTemplateName: 1-64 characters of a-z0-9_.-, the first a letter or digit (`^[a-z0-9][a-z0-9_.-]{0,63}$`,
// written out: every templated send asks, and the regexp cost it a microsecond).
func validTemplateName(name string) bool {
	if len(name) < 1 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}

type templateRequest struct {
	Format        *string                    `json:"format"`
	DefaultLocale *string                    `json:"default_locale"`
	Locales       map[string]json.RawMessage `json:"locales"`
}

type templateResponse struct {
	Name          string          `json:"name"`
	Version       int             `json:"version"`
	Format        string          `json:"format"`
	DefaultLocale string          `json:"default_locale"`
	Locales       json.RawMessage `json:"locales"`
	CreatedAt     string          `json:"created_at"`
}

func templateResource(t store.Template) templateResponse {
	return templateResponse{Name: t.Name, Version: t.Version, Format: t.Format, DefaultLocale: t.DefaultLocale,
		Locales: t.Locales, CreatedAt: timestamp(t.CreatedAt)}
}

func templateNameParam(r *http.Request) (string, error) {
	name := chi.URLParam(r, "name")
	if !validTemplateName(name) {
		return "", apierror.TemplateNotFound.With("no template %q: a name is 1-64 characters of a-z0-9_.-, starting with a letter or digit", truncate(name, 64))
	}
	return name, nil
}

// putTemplate is PUT /v1/templates/{name}: 201 with a new version when it differs from the latest, 200
// with the latest when identical; 400 template_invalid naming the locale, line and column of a syntax error.
func (a *API) putTemplate(w http.ResponseWriter, r *http.Request) error {
	name, err := templateNameParam(r)
	if err != nil {
		return apierror.InvalidRequest.With("the name must be 1-64 characters of a-z0-9_.-, starting with a letter or digit")
	}
	var req templateRequest
	if err := decodeObjectMax(w, r, &req, MaxTemplateBodyBytes); err != nil {
		return err
	}
	row, set, err := validateTemplate(name, req)
	if err != nil {
		return err
	}
	tenant := principalOf(r.Context()).TenantID
	saved, created, err := a.store.SaveTemplate(r.Context(), tenant, row)
	if err != nil {
		return err
	}
	a.templates.saved(tenant, name, &cachedTemplate{row: saved, set: set})
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, templateResource(saved))
	return nil
}

// validateTemplate checks a template's fields and parses every source.
func validateTemplate(name string, req templateRequest) (store.Template, *template.Set, error) {
	format := notification.FormatText
	if req.Format != nil {
		if *req.Format != notification.FormatText && *req.Format != notification.FormatHTML {
			return store.Template{}, nil, apierror.InvalidRequest.With(`format must be "text" or "html"`)
		}
		format = *req.Format
	}
	if len(req.Locales) < 1 || len(req.Locales) > MaxTemplateLocales {
		return store.Template{}, nil, apierror.InvalidRequest.With("locales must be an object of 1-%d locales (got %d)", MaxTemplateLocales, len(req.Locales))
	}
	if req.DefaultLocale == nil {
		return store.Template{}, nil, apierror.InvalidRequest.With("default_locale is required")
	}
	if _, ok := req.Locales[*req.DefaultLocale]; !ok {
		return store.Template{}, nil, apierror.InvalidRequest.With("default_locale %q must be one of the locales", truncate(*req.DefaultLocale, 40))
	}
	parsed := make(map[string]localeSource, len(req.Locales))
	seen := map[string]string{}
	for tag, raw := range req.Locales {
		if !localeTag.MatchString(tag) {
			return store.Template{}, nil, apierror.InvalidRequest.With("locale %q is not a language tag (like en, pt-br, zh-Hant-TW)", truncate(tag, 40))
		}
		if other, ok := seen[template.NormalizeTag(tag)]; ok {
			return store.Template{}, nil, apierror.InvalidRequest.With("locales %q and %q are the same locale", other, tag)
		}
		seen[template.NormalizeTag(tag)] = tag
		var l localeSource
		if err := decodeStrict(raw, &l, "locale "+strconv.Quote(tag)); err != nil {
			return store.Template{}, nil, err
		}
		if l.Message == nil || blank(*l.Message) {
			return store.Template{}, nil, apierror.InvalidRequest.With("locale %q needs a message", tag)
		}
		size := len(*l.Message)
		if l.Buttons != nil {
			if len(*l.Buttons) > MaxButtonRows {
				return store.Template{}, nil, apierror.InvalidRequest.With("locale %q: buttons may hold at most %d rows", tag, MaxButtonRows)
			}
			for i, row := range *l.Buttons {
				if len(row) < 1 || len(row) > MaxButtonsPerRow {
					return store.Template{}, nil, apierror.InvalidRequest.With("locale %q: row %d of buttons must hold 1-%d buttons", tag, i, MaxButtonsPerRow)
				}
				for j, b := range row {
					if b.Text == nil || b.URL == nil {
						return store.Template{}, nil, apierror.InvalidRequest.With(`locale %q: button %d of row %d must be {"text", "url"}`, tag, j, i)
					}
					size += len(*b.Text) + len(*b.URL)
				}
			}
		}
		if size > MaxLocaleSourceBytes {
			return store.Template{}, nil, apierror.InvalidRequest.With("locale %q: its sources are %d bytes; at most %d", tag, size, MaxLocaleSourceBytes)
		}
		// The decoded strings, not raw: JSON writes a NUL as the six characters \u0000, which jsonb refuses.
		if !storable(*l.Message) {
			return store.Template{}, nil, apierror.InvalidRequest.With("locale %q: the message %s", tag, nulRule)
		}
		if l.Buttons != nil {
			for i, row := range *l.Buttons {
				for j, b := range row {
					if !storable(*b.Text) || !storable(*b.URL) {
						return store.Template{}, nil, apierror.InvalidRequest.With("locale %q: button %d of row %d %s", tag, j, i, nulRule)
					}
				}
			}
		}
		parsed[tag] = l
	}
	set, err := template.Compile(format == notification.FormatHTML, *req.DefaultLocale, sources(parsed))
	var inv *template.InvalidError
	if errors.As(err, &inv) {
		return store.Template{}, nil, apierror.TemplateInvalid.With("%v", inv)
	}
	if err != nil {
		return store.Template{}, nil, err
	}
	locales, _ := json.Marshal(req.Locales) // raw messages: cannot fail
	return store.Template{Name: name, Format: format, DefaultLocale: *req.DefaultLocale, Locales: locales}, set, nil
}

// getTemplate is GET /v1/templates/{name} (the latest) and GET /v1/templates/{name}/versions/{version}.
func (a *API) getTemplate(w http.ResponseWriter, r *http.Request) error {
	name, err := templateNameParam(r)
	if err != nil {
		return err
	}
	version := 0
	if v := chi.URLParam(r, "version"); v != "" {
		if version, err = strconv.Atoi(v); err != nil || !integerLiteral.MatchString(v) || version < 1 {
			return apierror.TemplateNotFound.With("no version %q of template %q", truncate(v, 20), name)
		}
	}
	t, err := a.store.GetTemplate(r.Context(), principalOf(r.Context()).TenantID, name, version)
	if errors.Is(err, store.ErrNotFound) {
		return templateNotFound(name, version)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, templateResource(t))
	return nil
}

// deleteTemplate is DELETE /v1/templates/{name}: 204; notifications already accepted keep what was rendered.
func (a *API) deleteTemplate(w http.ResponseWriter, r *http.Request) error {
	name, err := templateNameParam(r)
	if err != nil {
		return err
	}
	tenant := principalOf(r.Context()).TenantID
	err = a.store.DeleteTemplate(r.Context(), tenant, name)
	if errors.Is(err, store.ErrNotFound) {
		return templateNotFound(name, 0)
	}
	if err != nil {
		return err
	}
	a.templates.saved(tenant, name, nil)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type templateSummary struct {
	Name          string   `json:"name"`
	Version       int      `json:"version"`
	Format        string   `json:"format"`
	DefaultLocale string   `json:"default_locale"`
	LocaleTags    []string `json:"locale_tags"`
	CreatedAt     string   `json:"created_at"`
}

type templateList struct {
	Data       []templateSummary `json:"data"`
	NextCursor *string           `json:"next_cursor"`
}

// listTemplates is GET /v1/templates: by name, limit and cursor as §4 (the cursor: the last name, opaque).
func (a *API) listTemplates(w http.ResponseWriter, r *http.Request) error {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return apierror.InvalidRequest.With("malformed query string")
	}
	for name, values := range q {
		if name != "limit" && name != "cursor" {
			return apierror.InvalidRequest.With("unknown query parameter %q (known: limit, cursor)", truncate(name, 64))
		}
		if len(values) > 1 {
			return apierror.InvalidRequest.With("query parameter %q given more than once", name)
		}
	}
	limit := DefaultTemplateListLim
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || !integerLiteral.MatchString(q.Get("limit")) || n < 1 || n > store.MaxListLimit {
			return apierror.InvalidRequest.With("limit must be an integer 1-%d", store.MaxListLimit)
		}
		limit = n
	}
	after := ""
	if q.Has("cursor") {
		b, err := base64.RawURLEncoding.DecodeString(q.Get("cursor"))
		if err != nil || len(b) < 2 || b[0] != 't' || !validTemplateName(string(b[1:])) {
			return apierror.InvalidRequest.With("cursor is not one this listing handed out")
		}
		after = string(b[1:])
	}
	// One more than the page tells whether there is a next one.
	list, err := a.store.ListTemplates(r.Context(), principalOf(r.Context()).TenantID, after, limit+1)
	if err != nil {
		return err
	}
	out := templateList{Data: []templateSummary{}}
	for i, t := range list {
		if i == limit {
			c := base64.RawURLEncoding.EncodeToString([]byte("t" + list[limit-1].Name))
			out.NextCursor = &c
			break
		}
		out.Data = append(out.Data, templateSummary{Name: t.Name, Version: t.Version, Format: t.Format,
			DefaultLocale: t.DefaultLocale, LocaleTags: t.LocaleTags, CreatedAt: timestamp(t.CreatedAt)})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// templated is what a send's template fields resolved to: the template's version and the request's meaning
// for an Idempotency-Key (as given, not as rendered, so that a retry after the template changed still
// matches its first try).
type templated struct {
	ref    notification.TemplateRef
	fields *templateFields
}

// meaning is the template's part of the send's meaning (validSend.meaning): made only when the request has
// an Idempotency-Key.
func (t *templated) meaning() []any {
	// The data as the maps encoding/json decoded before decodeData, so that a key's hash is what it was.
	return []any{"template", t.fields.name, t.fields.version, t.fields.locale, template.ToMaps(t.fields.data)}
}

// templateFields are a send's template fields, parsed.
type templateFields struct {
	name    string
	version int    // 0: the latest
	locale  string // "": none given
	data    any    // decodeData's: an *template.Object or a map; nil without data
	rawData json.RawMessage
}

// parseTemplateFields checks a send's template fields (nil when the send names no template). message,
// format and buttons with template are invalid_request: the template decides them.
func parseTemplateFields(req sendRequest) (*templateFields, error) {
	if req.Template == nil {
		if !absent(req.Data) || !absent(req.TemplateVersion) || !absent(req.Locale) {
			return nil, apierror.InvalidRequest.With("data, template_version and locale go with template")
		}
		return nil, nil
	}
	if req.Message != nil {
		return nil, apierror.InvalidRequest.With("message and template exclude each other: the template makes the message")
	}
	if !absent(req.Format) || !absent(req.Buttons) {
		return nil, apierror.InvalidRequest.With("format and buttons do not go with template: the template decides them")
	}
	f := &templateFields{name: *req.Template}
	if !validTemplateName(f.name) {
		return nil, apierror.TemplateNotFound.With("no template %q", truncate(f.name, 64))
	}
	if !absent(req.TemplateVersion) {
		v, err := strconv.Atoi(string(req.TemplateVersion))
		if err != nil || !integerLiteral.Match(req.TemplateVersion) || v < 1 {
			return nil, apierror.InvalidRequest.With("template_version must be an integer of at least 1")
		}
		f.version = v
	}
	if !absent(req.Locale) {
		if req.Locale[0] != '"' || json.Unmarshal(req.Locale, &f.locale) != nil || !localeTag.MatchString(f.locale) {
			return nil, apierror.InvalidRequest.With("locale must be a language tag, like en, pt-br or zh-Hant-TW")
		}
	}
	if !absent(req.Data) {
		if len(req.Data) > MaxTemplateDataBytes {
			return nil, apierror.InvalidRequest.With("data is %d bytes of JSON; at most %d", len(req.Data), MaxTemplateDataBytes)
		}
		// Numbers print as they were written; the NUL check is made in the same pass (templatedata.go).
		data, nul, ok := decodeData(req.Data)
		if req.Data[0] != '{' || !ok {
			return nil, apierror.InvalidRequest.With("data must be an object")
		}
		f.data, f.rawData = data, req.Data
		if nul != "" {
			return nil, apierror.InvalidRequest.With("%s %s", truncate(nul, 80), nulRule)
		}
	}
	return f, nil
}

// nulIn finds a NUL in a decoded JSON value's strings and keys, which a rendered message could not hold (nor
// PostgreSQL store), and returns where: "data.a.b[2]". The data is at most MaxTemplateDataBytes.
func nulIn(v any, path string) (string, bool) {
	switch x := v.(type) {
	case string:
		return path, !storable(x)
	case map[string]any:
		for k, e := range x {
			if !storable(k) {
				return path + " key", true
			}
			if p, found := nulIn(e, path+"."+k); found {
				return p, true
			}
		}
	case *template.Object:
		for _, e := range x.Members {
			if !storable(e.Key) {
				return path + " key", true
			}
			if p, found := nulIn(e.Value, path+"."+e.Key); found {
				return p, true
			}
		}
	case []any:
		for i, e := range x {
			if p, found := nulIn(e, path+"["+strconv.Itoa(i)+"]"); found {
				return p, true
			}
		}
	}
	return "", false
}

// userLocales reads the locales (and time zones) of the users of a request's templated sends whose locale
// the send's own does not decide — none for a template of one locale, none when the send's locale matches
// one of the template's — and, for a tenant past the zone cache's cap, of those whose template uses the
// date filter (the others' zones come from the cache, zonecache.go). So a send that names its locale
// costs no read; and the reads of concurrent requests share one statement (localeReads).
func (a *API) userLocales(tenant string, users []string) (map[string]store.UserLocale, error) {
	if len(users) == 0 {
		return nil, nil
	}
	slices.Sort(users)
	return a.localeReads.Do(localeRead{tenant: tenant, users: slices.Compact(users)})
}

// localeRead is one request's users.
type localeRead struct {
	tenant string
	users  []string
}

// newLocaleReads groups the locale reads of concurrent requests into one statement: two at a time, each
// of up to 64 requests. Measured with make bench-ingress -template (a date in every send), one statement
// per request cost PostgreSQL more CPU than the send's batched insert (docs/benchmarks.md). The read runs
// under the store's own deadline, not one caller's: a caller that gives up does not fail the others.
func newLocaleReads(st *store.Store, statements *atomic.Int64) *batch.Inline[localeRead, map[string]store.UserLocale] {
	return batch.NewInline(2, 64, func(reqs []localeRead) ([]map[string]store.UserLocale, error) {
		statements.Add(1)
		var keys []store.TenantUser
		for _, r := range reqs {
			for _, u := range r.users {
				keys = append(keys, store.TenantUser{TenantID: r.tenant, UserID: u})
			}
		}
		all, err := st.UserLocales(context.Background(), keys)
		if err != nil {
			return nil, err
		}
		out := make([]map[string]store.UserLocale, len(reqs))
		for i, r := range reqs {
			out[i] = make(map[string]store.UserLocale, len(r.users))
			for _, u := range r.users {
				if l, ok := all[store.TenantUser{TenantID: r.tenant, UserID: u}]; ok {
					out[i][u] = l
				}
			}
		}
		return out, nil
	})
}

// needsUserLocale: whether choosing the send's locale needs its user's (§12's chain): not for a template
// of one locale, nor when the send's own locale matches one of the template's.
func needsUserLocale(t *cachedTemplate, locale string) bool {
	if t.set.Locales() == 1 {
		return false
	}
	_, ok := t.set.Match(locale)
	return !ok
}

// resolveTemplates resolves the templated sends of a request (one send, or a batch's items; nil entries
// are items already refused): each one's template from the cache, then the locales of the users whose
// locale the send does not decide, in one statement for the whole request, and the zones of the users of
// the other sends whose template formats dates, from the zone cache, then each render into its
// request. An item's own failure (an unknown template, missing data…) is in its place in errs; err is a
// failure of the whole request (PostgreSQL).
func (a *API) resolveTemplates(ctx context.Context, tenant string, reqs []*sendRequest) (tms []*templated, errs []error, err error) {
	tms, errs = make([]*templated, len(reqs)), make([]error, len(reqs))
	fields := make([]*templateFields, len(reqs))
	found := make([]*cachedTemplate, len(reqs))
	var users, zoned []string // users whose locale is read; users of whom only the zone is
	for i, req := range reqs {
		if req == nil {
			continue
		}
		if fields[i], errs[i] = parseTemplateFields(*req); errs[i] != nil || fields[i] == nil {
			continue
		}
		t, err := a.templates.get(ctx, tenant, fields[i].name, fields[i].version)
		if _, catalogued := apierror.From(err); err != nil && !catalogued {
			return nil, nil, err
		}
		if found[i], errs[i] = t, err; err != nil || req.UserID == nil {
			continue
		}
		switch {
		case needsUserLocale(t, fields[i].locale):
			users = append(users, *req.UserID) // the read gives the zone too
		case t.set.ReadsZone:
			zoned = append(zoned, *req.UserID)
		}
	}
	var zones map[string]string
	if len(zoned) > 0 {
		var cached bool
		if zones, cached, err = a.zones.zonesOf(ctx, tenant, zoned); err != nil {
			return nil, nil, err
		}
		if !cached {
			users = append(users, zoned...) // a tenant past the cache's cap: read per request, as locales
		}
	}
	locales, err := a.userLocales(tenant, users)
	if err != nil {
		return nil, nil, err
	}
	for i, req := range reqs {
		if found[i] == nil || errs[i] != nil {
			continue
		}
		var user store.UserLocale
		if req.UserID != nil {
			var read bool
			if user, read = locales[*req.UserID]; !read {
				// Not read: only the zone matters (the locale is the send's or the template's only one).
				user.TimeZone = zones[*req.UserID]
			}
		}
		tms[i], errs[i] = renderTemplate(req, fields[i], found[i], user)
	}
	return tms, errs, nil
}

// renderTemplate renders a templated send into the request's message, format and buttons, which
// validateSend then checks with every §10 rule, as a send's own.
func renderTemplate(req *sendRequest, f *templateFields, t *cachedTemplate, user store.UserLocale) (*templated, error) {
	locale := t.set.Choose(f.locale, user.Locale, user.MessengerLanguage)
	out, err := t.set.Render(locale, f.data, template.Options{Location: zone(user.TimeZone)})
	if err != nil {
		return nil, renderError(err)
	}
	req.Message = &out.Message
	req.Format = formatJSON(t.row.Format)
	if len(out.Buttons) > 0 {
		rows := make([][]map[string]string, len(out.Buttons))
		for i, row := range out.Buttons {
			rows[i] = make([]map[string]string, len(row))
			for j, b := range row {
				rows[i][j] = map[string]string{"text": b.Text, "url": b.URL}
			}
		}
		req.Buttons, _ = json.Marshal(rows)
	}
	return &templated{ref: notification.TemplateRef{Name: t.row.Name, Version: t.row.Version, Locale: out.Locale}, fields: f}, nil
}

// The formats as a send gives them, made once: validateSend only reads them.
var (
	formatTextJSON = json.RawMessage(`"` + notification.FormatText + `"`)
	formatHTMLJSON = json.RawMessage(`"` + notification.FormatHTML + `"`)
)

func formatJSON(format string) json.RawMessage {
	switch format {
	case notification.FormatText:
		return formatTextJSON
	case notification.FormatHTML:
		return formatHTMLJSON
	}
	return json.RawMessage(`"` + format + `"`)
}

// zones caches the locations of the users' time zones by name: LoadLocation reads the zone database each
// time. The names are IANA names PATCH /v1/users checked (a few hundred at most), so the cache is bounded.
var zones sync.Map

// zone is the location of a user's time zone for the date filter; nil (UTC) when unset or no longer known.
func zone(name string) *time.Location {
	if name == "" {
		return nil
	}
	if l, ok := zones.Load(name); ok {
		return l.(*time.Location)
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil
	}
	zones.Store(name, l)
	return l
}

// renderError maps the template package's errors to the catalogue.
func renderError(err error) error {
	var m *template.MissingError
	var r *template.RenderError
	switch {
	case errors.As(err, &m):
		return apierror.TemplateDataMissing.With("the data misses %d path(s) the template reads: %s", len(m.Paths), joinQuoted(m.Paths))
	case errors.As(err, &r):
		return apierror.TemplateRenderFailed.With("%s", r.Msg)
	}
	return err
}

func joinQuoted(ps []string) string {
	b, _ := json.Marshal(ps)
	return string(bytes.Trim(b, "[]"))
}

type previewRequest struct {
	Data    json.RawMessage `json:"data"`
	Locale  json.RawMessage `json:"locale"`
	UserID  *string         `json:"user_id"`
	Version json.RawMessage `json:"version"`
}

type previewButton struct {
	Text string `json:"text"`
	URL  string `json:"url"`
}

type previewResponse struct {
	Name    string            `json:"name"`
	Version int               `json:"version"`
	Locale  string            `json:"locale"`
	Format  string            `json:"format"`
	Message string            `json:"message"`
	Buttons [][]previewButton `json:"buttons"`
}

// previewTemplate is POST /v1/templates/{name}/preview: what a send with the same data would deliver
// (before branding), or the error it would get, with the same code.
func (a *API) previewTemplate(w http.ResponseWriter, r *http.Request) error {
	name, err := templateNameParam(r)
	if err != nil {
		return err
	}
	var req previewRequest
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		if err := decodeObject(w, r, &req); err != nil {
			return err
		}
	}
	p := principalOf(r.Context())
	send := sendRequest{Template: &name, Data: req.Data, Locale: req.Locale, TemplateVersion: req.Version, UserID: req.UserID}
	// Without a user, the chain is the preview's locale, then the template's default.
	tms, errs, err := a.resolveTemplates(r.Context(), p.TenantID, []*sendRequest{&send})
	if err != nil {
		return err
	}
	if errs[0] != nil {
		return errs[0]
	}
	tm := tms[0]
	send.UserID = cmpOr(req.UserID, "preview") // validateSend wants a user; the preview stores nothing
	// Every rule a send's result meets (§10, the branded length), with the key's label.
	if _, err := validateSend(send, p.Label, time.Now()); err != nil {
		return err
	}
	out := previewResponse{Name: tm.ref.Name, Version: tm.ref.Version, Locale: tm.ref.Locale, Format: string(bytes.Trim(send.Format, `"`)),
		Message: *send.Message, Buttons: [][]previewButton{}}
	if len(send.Buttons) > 0 {
		_ = json.Unmarshal(send.Buttons, &out.Buttons)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// cmpOr is p's string, or def when p is nil.
func cmpOr(p *string, def string) *string {
	if p != nil {
		return p
	}
	return &def
}
