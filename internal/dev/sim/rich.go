package sim

// Formatted messages (spec v1-extensions §10), as on the platform: a message's entities are checked against
// its text — offsets and lengths on the text's UTF-16 characters, nesting, a text_link's URL scheme — and
// a message whose entities the platform would refuse is refused with its 400 "can't parse entities: …",
// which Herald's worker ends as failed. Stricter than the platform where it would drop or split an entity
// (internal/richtext.Validate): what the simulator refuses, Herald must never send. A message's entities
// are kept, and rendered as the platform's HTML for the transcript (Line.HTML), which the console shows.
// More than richtext.MaxEntities entities are refused with the platform's 400 "entities too long".

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/heraldhq/herald/internal/richtext"
)

// checkEntities is parseEntities, then the entities checked against text as the platform checks them.
func checkEntities(text string, raw json.RawMessage) (json.RawMessage, error) {
	entities, err := parseEntities(raw)
	if err != nil || entities == nil {
		return entities, err
	}
	return entities, validateEntities(text, entities)
}

// validateEntities checks a message's entities (parseEntities' output) against its text.
func validateEntities(text string, entities json.RawMessage) error {
	m, err := richMessage(text, entities)
	if err == nil {
		err = richtext.Validate(m)
	}
	switch {
	case errors.Is(err, richtext.ErrTooManyEntities):
		// The platform's own answer past its limit (MTProto's ENTITIES_TOO_LONG), which says nothing of parsing.
		return badRequest("entities too long")
	case err != nil:
		return badRequest("can't parse entities: %s", strings.TrimPrefix(err.Error(), richtext.ErrInvalid.Error()+": "))
	}
	return nil
}

func richMessage(text string, entities json.RawMessage) (richtext.Message, error) {
	m := richtext.Message{Text: text}
	if len(entities) > 0 {
		if err := json.Unmarshal(entities, &m.Entities); err != nil {
			return m, errors.New("entities must be an array of MessageEntity")
		}
	}
	return m, nil
}

// lineHTML is a bot's message as the platform's HTML (escaped text, the tags of its entities), for the
// transcript; "" for a message without entities, whose text is shown as it is.
func lineHTML(text string, entities json.RawMessage) string {
	if len(entities) == 0 {
		return ""
	}
	m, err := richMessage(text, entities)
	if err != nil {
		return ""
	}
	html, err := richtext.RenderHTML(m)
	if err != nil {
		return "" // not reached: the entities were validated when the message was sent
	}
	return html
}
