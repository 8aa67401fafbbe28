package messenger_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/heraldhq/herald/internal/messenger"
)

func TestParseUpdateRecognisesKinds(t *testing.T) {
	tests := []struct {
		name string
		body string
		kind string
		id   int64
	}{
		{"text message", `{"update_id":10,"message":{"message_id":1,"from":{"id":7,"is_bot":false,"first_name":"Ann"},"chat":{"id":7,"type":"private"},"date":1700000000,"text":"/start abc"}}`, "message", 10},
		{"edited message", `{"update_id":11,"edited_message":{"message_id":1,"chat":{"id":7,"type":"private"},"date":1,"text":"x"}}`, "edited_message", 11},
		{"callback query", `{"update_id":12,"callback_query":{"id":"4382","data":"x"}}`, "callback_query", 12},
		{"bot blocked", `{"update_id":13,"my_chat_member":{"chat":{"id":7,"type":"private"}}}`, "my_chat_member", 13},
		{"kind without a field here", `{"update_id":14,"message_reaction":{"chat":{"id":7}}}`, "message_reaction", 14},
		{"no payload at all", `{"update_id":15}`, messenger.KindUnknown, 15},
		{"null payload is no payload", `{"update_id":16,"message":null}`, messenger.KindUnknown, 16},
		{"large id", `{"update_id":9007199254740991,"message":{"message_id":1,"chat":{"id":1,"type":"private"},"date":1}}`, "message", 9007199254740991},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := messenger.ParseUpdate([]byte(tt.body))
			if err != nil {
				t.Fatalf("ParseUpdate: unexpected error %v", err)
			}
			if u.UpdateID != tt.id {
				t.Errorf("UpdateID = %d, want %d", u.UpdateID, tt.id)
			}
			if got := u.Kind(); got != tt.kind {
				t.Errorf("Kind() = %q, want %q", got, tt.kind)
			}
		})
	}
}

func TestParseUpdateDecodesMessageAndContact(t *testing.T) {
	body := `{"update_id":20,"message":{"message_id":5,"from":{"id":42,"is_bot":false,"first_name":"Ann","username":"ann"},
		"chat":{"id":42,"type":"private","first_name":"Ann"},"date":1700000000,
		"contact":{"phone_number":"15551234567","first_name":"Ann","user_id":42}}}`
	u, err := messenger.ParseUpdate([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	m := u.Message
	if m == nil || m.From == nil || m.Contact == nil {
		t.Fatalf("message, from and contact must be decoded: %+v", u)
	}
	if m.MessageID != 5 || m.From.ID != 42 || m.Chat.ID != 42 || m.Chat.Type != messenger.ChatPrivate || m.Date != 1700000000 {
		t.Errorf("message fields wrong: %+v", m)
	}
	if m.Contact.PhoneNumber != "15551234567" || m.Contact.UserID != 42 {
		t.Errorf("contact wrong: %+v", m.Contact)
	}

	noOwner := `{"update_id":21,"message":{"message_id":6,"chat":{"id":42,"type":"private"},"date":1,"contact":{"phone_number":"+1555","first_name":"Bob"}}}`
	u, err = messenger.ParseUpdate([]byte(noOwner))
	if err != nil {
		t.Fatal(err)
	}
	if u.Message.Contact.UserID != 0 {
		t.Errorf("a contact without user_id must decode as UserID 0, got %d", u.Message.Contact.UserID)
	}
}

func TestParseUpdateRejectsInvalidBodies(t *testing.T) {
	for name, body := range map[string]string{
		"not JSON":              `{"update_id":`,
		"array":                 `[{"update_id":1}]`,
		"null":                  `null`,
		"string":                `"x"`,
		"missing update_id":     `{"message":{"message_id":1,"chat":{"id":1,"type":"private"},"date":1}}`,
		"string update_id":      `{"update_id":"1"}`,
		"fractional update_id":  `{"update_id":1.5}`,
		"null update_id":        `{"update_id":null}`,
		"message of wrong type": `{"update_id":1,"message":"hello"}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := messenger.ParseUpdate([]byte(body))
			if !errors.Is(err, messenger.ErrInvalidUpdate) {
				t.Fatalf("ParseUpdate(%s) error = %v, want ErrInvalidUpdate", body, err)
			}
		})
	}
}

func TestUpdateRoundTripKeepsKind(t *testing.T) {
	u := messenger.Update{UpdateID: 3, Message: &messenger.Message{MessageID: 1, Chat: messenger.Chat{ID: 9, Type: "private"}, Text: "hi"}}
	if u.Kind() != messenger.KindMessage {
		t.Fatalf("Kind of a built update = %q", u.Kind())
	}
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	var back messenger.Update
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Kind() != messenger.KindMessage || back.Message.Text != "hi" || back.UpdateID != 3 {
		t.Errorf("round trip lost data: %s -> %+v", b, back)
	}
}

func TestReplyMarkupsUseBotAPIFieldNames(t *testing.T) {
	if got, want := string(messenger.ContactRequestKeyboard("Share my number")),
		`{"keyboard":[[{"text":"Share my number","request_contact":true}]],"resize_keyboard":true,"one_time_keyboard":true}`; got != want {
		t.Errorf("ContactRequestKeyboard = %s, want %s", got, want)
	}
	if got, want := string(messenger.RemoveKeyboard()), `{"remove_keyboard":true}`; got != want {
		t.Errorf("RemoveKeyboard = %s, want %s", got, want)
	}
}
