package ingress

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/brand"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/richtext"
)

// The limits of a send's link buttons (spec v1-extensions §10).
const (
	MaxButtonRows       = 8
	MaxButtonsPerRow    = 4
	MaxButtonTextLength = 64 // code points
)

// richOptions are a send's rich options (§10) as validated: what the store keeps and the worker sends.
type richOptions struct {
	notification.Rich
	buttons json.RawMessage // the inline keyboard of the link buttons; nil for none
	given   bool            // any of the options was given: they join the Idempotency-Key's meaning
}

// parseRichOptions validates format, buttons, silent, protect_content and link_preview. An absent or null
// option takes its default; a plain-text send that gives none is today's.
func parseRichOptions(req sendRequest) (richOptions, error) {
	var o richOptions
	format, err := parseFormat(req.Format)
	if err != nil {
		return o, err
	}
	if format == notification.FormatHTML {
		o.Format = format
	}
	if o.buttons, err = parseButtons(req.Buttons); err != nil {
		return o, err
	}
	if o.Silent, err = parseBool("silent", req.Silent, false); err != nil {
		return o, err
	}
	if o.ProtectContent, err = parseBool("protect_content", req.ProtectContent, false); err != nil {
		return o, err
	}
	preview, err := parseBool("link_preview", req.LinkPreview, true)
	if err != nil {
		return o, err
	}
	o.NoLinkPreview = !preview
	o.given = !absent(req.Format) || !absent(req.Buttons) || !absent(req.Silent) || !absent(req.ProtectContent) || !absent(req.LinkPreview)
	return o, nil
}

// meaning appends the rich options to a send's meaning (sendFields) when one was given, so that a send
// without them keeps its meaning (and its Idempotency-Key its match) from before they existed. They come
// as values with the defaults filled in (format, the buttons' keyboard, the three flags): a send that names
// a default means what one that omits another option means.
func (o richOptions) meaning(fields []any) []any {
	if !o.given {
		return fields
	}
	return append(fields, "rich", cmp.Or(o.Format, notification.FormatText), o.buttons, o.Silent, o.ProtectContent, !o.NoLinkPreview)
}

// parseFormat accepts an absent or null format (text), "text" or "html".
func parseFormat(raw json.RawMessage) (string, error) {
	if absent(raw) {
		return notification.FormatText, nil
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil || (s != notification.FormatText && s != notification.FormatHTML) {
		return "", apierror.InvalidRequest.With(`format must be "text" or "html"`)
	}
	return s, nil
}

// parseBool accepts an absent or null flag (def) or a JSON boolean.
func parseBool(field string, raw json.RawMessage, def bool) (bool, error) {
	switch string(raw) {
	case "", "null":
		return def, nil
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, apierror.InvalidRequest.With("%s must be a boolean", field)
}

// button is one link button as a send gives it: exactly text and url.
type button struct {
	Text *string `json:"text"`
	URL  *string `json:"url"`
}

// parseButtons accepts absent, null or an array of at most 8 rows of 1-4 link buttons, each a text of 1-64
// characters and an https: or tg: url the platform takes (richtext.CheckButtonURL), and returns them as the
// inline keyboard sendMessage takes (nil for none: no rows).
func parseButtons(raw json.RawMessage) (json.RawMessage, error) {
	if absent(raw) {
		return nil, nil
	}
	var rows [][]json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &rows) != nil {
		return nil, apierror.InvalidRequest.With(`buttons must be an array of rows, each an array of {"text", "url"}`)
	}
	if len(rows) > MaxButtonRows {
		return nil, apierror.InvalidRequest.With("buttons may hold at most %d rows (got %d)", MaxButtonRows, len(rows))
	}
	if len(rows) == 0 {
		return nil, nil
	}
	kb := messenger.InlineKeyboardMarkup{InlineKeyboard: make([][]messenger.InlineKeyboardButton, len(rows))}
	for i, row := range rows {
		if len(row) < 1 || len(row) > MaxButtonsPerRow {
			return nil, apierror.InvalidRequest.With("row %d of buttons must hold 1-%d buttons (got %d)", i+1, MaxButtonsPerRow, len(row))
		}
		kb.InlineKeyboard[i] = make([]messenger.InlineKeyboardButton, len(row))
		for j, rawButton := range row {
			// Counted from 1, as a person counts the buttons they wrote.
			at := func() string { return "button " + strconv.Itoa(j+1) + " of row " + strconv.Itoa(i+1) }
			var b button
			if err := decodeStrict(rawButton, &b, at()); err != nil {
				e, _ := apierror.From(err)
				return nil, apierror.InvalidRequest.With(`%s (a button is {"text", "url"}): %s`, at(), e.Message)
			}
			if b.Text == nil || b.URL == nil {
				return nil, apierror.InvalidRequest.With(`%s must be an object {"text", "url"} of two strings`, at())
			}
			if n := brand.Length(*b.Text); n < 1 || n > MaxButtonTextLength || blank(*b.Text) {
				return nil, apierror.InvalidRequest.With("the text of %s must be 1-%d characters, not only white space (got %d)", at(), MaxButtonTextLength, n)
			}
			if !storable(*b.Text) || !storable(*b.URL) {
				return nil, apierror.InvalidRequest.With("the text and url of %s %s", at(), nulRule)
			}
			if why := richtext.CheckButtonURL(*b.URL); why != "" {
				return nil, apierror.InvalidRequest.With("the url of %s: %s", at(), why)
			}
			kb.InlineKeyboard[i][j] = messenger.InlineKeyboardButton{Text: *b.Text, URL: *b.URL}
		}
	}
	out, _ := json.Marshal(kb) // strings only: cannot fail
	return out, nil
}

// brandHTML parses a send's markup (ParseHTML: 400 invalid_format naming the offset), checks its visible
// text as a plain message's (1-4096 characters, not blank) and brands it: the brand line a plain prefix,
// the entities shifted past it (richtext.Brand), within the platform's limit (message_too_long_after_branding).
// It returns the body and its entities as the store keeps them (richtext's compact form, "" for none),
// which the worker sends.
func brandHTML(label, markup string) (string, string, error) {
	m, err := richtext.ParseHTML(markup)
	if err != nil {
		return "", "", apierror.InvalidFormat.With("message: %v", err)
	}
	if n := m.Length(); n < 1 || n > brand.MaxMessageLength {
		return "", "", apierror.InvalidRequest.With("message's visible text (the markup's text, without its tags) must be 1-%d characters (got %d)", brand.MaxMessageLength, n)
	}
	if blank(m.Text) {
		return "", "", apierror.InvalidRequest.With("message must not be blank: its visible text holds only white space")
	}
	branded, fits := richtext.Brand(label, m)
	if !fits {
		return "", "", tooLongAfterBranding(branded.Length(), m.Length())
	}
	entities, err := richtext.EncodeEntities(branded.Entities)
	if err != nil {
		return "", "", fmt.Errorf("while storing the entities of a parsed message: %w", err) // ParseHTML's types all have a form
	}
	return branded.Text, entities, nil
}
