package store

// A tenant's message templates (spec v1-extensions §12): names, and their versions, kept. The ingress parses
// and renders them (internal/template); here they are rows.

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/audit"
)

// Template is one version of a tenant's template, its locales as the tenant gave them (a JSON object of
// locale tag → {"message", "buttons"}).
type Template struct {
	Name          string
	Version       int
	Format        string // notification.FormatText or FormatHTML
	DefaultLocale string
	Locales       json.RawMessage
	CreatedAt     time.Time
}

// TemplateSummary is a template in a list: its latest version without the sources.
type TemplateSummary struct {
	Name          string
	Version       int
	Format        string
	DefaultLocale string
	LocaleTags    []string // sorted
	CreatedAt     time.Time
}

// SaveTemplate stores t as the next version of the tenant's template t.Name, unless the latest version is
// identical (the same format, default locale and locales, as jsonb compares them: key order and spacing
// do not count): then it returns that version and created false. Versions count on across a deletion, so
// that a version number never names two contents. The name's row is locked for the transaction, so two
// saves of one name make two versions in turn (or one, when identical).
func (s *Store) SaveTemplate(ctx context.Context, tenantID string, t Template) (Template, bool, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var out Template
	var created bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO template_names (tenant_id, name, latest_version) VALUES ($1, $2, 0)
			ON CONFLICT (tenant_id, name) DO NOTHING`, tenantID, t.Name); err != nil {
			return err
		}
		var latest int
		var deleted bool
		if err := tx.QueryRow(ctx, `SELECT latest_version, deleted_at IS NOT NULL FROM template_names
			WHERE tenant_id = $1 AND name = $2 FOR UPDATE`, tenantID, t.Name).Scan(&latest, &deleted); err != nil {
			return err
		}
		if latest > 0 && !deleted {
			rows, _ := tx.Query(ctx, `SELECT `+templateColumns+` FROM template_versions
				WHERE tenant_id = $1 AND name = $2 AND version = $3
				  AND format = $4 AND default_locale = $5 AND locales = $6::jsonb`,
				tenantID, t.Name, latest, t.Format, t.DefaultLocale, string(t.Locales))
			same, err := pgx.CollectRows(rows, scanTemplate)
			if err != nil {
				return err
			}
			if len(same) == 1 {
				out, created = same[0], false
				return nil
			}
		}
		rows, _ := tx.Query(ctx, `INSERT INTO template_versions (tenant_id, name, version, format, default_locale, locales)
			VALUES ($1, $2, $3, $4, $5, $6::jsonb) RETURNING `+templateColumns,
			tenantID, t.Name, latest+1, t.Format, t.DefaultLocale, string(t.Locales))
		v, err := pgx.CollectExactlyOneRow(rows, scanTemplate)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE template_names SET latest_version = $3, deleted_at = NULL
			WHERE tenant_id = $1 AND name = $2`, tenantID, t.Name, latest+1); err != nil {
			return err
		}
		out, created = v, true
		return appendAudit(ctx, tx, tenantID, audit.TemplateSaved, t.Name, map[string]any{"version": v.Version})
	})
	return out, created, translate(err, "saving a template")
}

// GetTemplate reads a version of the tenant's template (version 0: the latest); ErrNotFound when the name
// is unknown or deleted, or the version does not exist.
func (s *Store) GetTemplate(ctx context.Context, tenantID, name string, version int) (Template, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var rows pgx.Rows
	if version == 0 {
		rows, _ = s.pool.Query(ctx, `SELECT `+prefixed("v.", templateColumns)+` FROM template_names n
			JOIN template_versions v ON v.tenant_id = n.tenant_id AND v.name = n.name AND v.version = n.latest_version
			WHERE n.tenant_id = $1 AND n.name = $2 AND n.deleted_at IS NULL`, tenantID, name)
	} else {
		// The versions of a deleted name are deleted with it.
		rows, _ = s.pool.Query(ctx, `SELECT `+templateColumns+` FROM template_versions
			WHERE tenant_id = $1 AND name = $2 AND version = $3`, tenantID, name, version)
	}
	t, err := pgx.CollectExactlyOneRow(rows, scanTemplate)
	return t, translate(err, "reading a template")
}

// DeleteTemplate deletes the tenant's template, every version; ErrNotFound when there is none. The name
// keeps its version counter (a later save makes the next version, never one deleted here); notifications
// already accepted keep what was rendered.
func (s *Store) DeleteTemplate(ctx context.Context, tenantID, name string) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE template_names SET deleted_at = now()
			WHERE tenant_id = $1 AND name = $2 AND deleted_at IS NULL AND latest_version > 0`, tenantID, name)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return pgx.ErrNoRows
		}
		if _, err = tx.Exec(ctx, `DELETE FROM template_versions WHERE tenant_id = $1 AND name = $2`, tenantID, name); err != nil {
			return err
		}
		return appendAudit(ctx, tx, tenantID, audit.TemplateDeleted, name, nil)
	})
	return translate(err, "deleting a template")
}

// ListTemplates lists the tenant's templates by name, those after the name after ("" from the start), at
// most limit: each its latest version, without the sources.
func (s *Store) ListTemplates(ctx context.Context, tenantID, after string, limit int) ([]TemplateSummary, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, _ := s.pool.Query(ctx, `
		SELECT n.name, v.version, v.format, v.default_locale,
		       ARRAY(SELECT k FROM jsonb_object_keys(v.locales) AS k ORDER BY k), v.created_at
		FROM template_names n
		JOIN template_versions v ON v.tenant_id = n.tenant_id AND v.name = n.name AND v.version = n.latest_version
		WHERE n.tenant_id = $1 AND n.deleted_at IS NULL AND n.name > $2
		ORDER BY n.name LIMIT $3`, tenantID, after, limit)
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TemplateSummary, error) {
		var t TemplateSummary
		err := row.Scan(&t.Name, &t.Version, &t.Format, &t.DefaultLocale, &t.LocaleTags, &t.CreatedAt)
		return t, err
	})
	return list, translate(err, "listing templates")
}

const templateColumns = `name, version, format, default_locale, locales, created_at`

func scanTemplate(row pgx.CollectableRow) (Template, error) {
	var t Template
	var locales []byte
	err := row.Scan(&t.Name, &t.Version, &t.Format, &t.DefaultLocale, &locales, &t.CreatedAt)
	t.Locales = locales
	return t, err
}

// prefixed qualifies each column of a list with p ("v.").
func prefixed(p, columns string) string {
	parts := strings.Split(columns, ", ")
	for i := range parts {
		parts[i] = p + parts[i]
	}
	return strings.Join(parts, ", ")
}
