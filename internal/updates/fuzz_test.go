package updates

import (
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/phone"
)

var (
	e164Pattern = regexp.MustCompile(`^\+[1-9][0-9]{7,14}$`)
	kindLabels  = map[string]bool{
		kindStart: true, kindContact: true, kindDevCommand: true, kindCommand: true, kindText: true,
		kindGroupMessage: true, kindOtherMessage: true, kindOther: true,
		messenger.KindMessage: true, messenger.KindEditedMessage: true, messenger.KindCallbackQuery: true,
		messenger.KindMyChatMember: true, messenger.KindChatMember: true, messenger.KindUnknown: true,
	}
)

// FuzzParseUpdate checks the parser and the classification of what it returns against arbitrary bodies:
// no panic; accepted bodies are JSON objects with an integer update_id; rejected ones wrap
// ErrInvalidUpdate; metric labels stay within a closed set; commands and phone numbers come out well-formed.
// `go test` runs the seed corpus (testdata/fuzz/FuzzParseUpdate and the seeds below); `make fuzz` runs it
// for longer with -fuzz.
func FuzzParseUpdate(f *testing.F) {
	for _, s := range []string{
		`{"update_id":1,"message":{"message_id":1,"from":{"id":5,"is_bot":false,"first_name":"A"},"chat":{"id":5,"type":"private"},"text":"/start abc"}}`,
		`{"update_id":2,"message":{"message_id":1,"from":{"id":5},"chat":{"id":5,"type":"private"},"contact":{"phone_number":"15551230001","user_id":5}}}`,
		`{"update_id":3,"edited_message":{"message_id":1,"chat":{"id":5,"type":"private"},"text":"x"}}`,
		`{"update_id":4,"poll":{}}`,
		`{"update_id":"5"}`,
		`{"update_id":1e3}`,
		`[]`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		u, err := ParseUpdate(body)
		if err != nil {
			if !errors.Is(err, messenger.ErrInvalidUpdate) {
				t.Fatalf("error does not wrap ErrInvalidUpdate: %v", err)
			}
			if len(body) >= 8 && strings.Contains(err.Error(), string(body)) {
				t.Fatalf("error repeats the body: %v", err)
			}
			return
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
			t.Fatalf("accepted a body that is not a JSON object: %q", body)
		}
		id, err := strconv.ParseInt(string(fields["update_id"]), 10, 64)
		if err != nil || id != u.UpdateID {
			t.Fatalf("accepted update_id %s as %d", fields["update_id"], u.UpdateID)
		}
		if l := updateKindLabel(u.Kind()); !kindLabels[l] {
			t.Fatalf("kind label %q is outside the closed set", l)
		}
		m := u.Message
		if m == nil {
			return
		}
		if name, args, ok := parseCommand(m.Text); ok {
			if !strings.HasPrefix(name, "/") || strings.ContainsAny(name, " \t\n@") || args != strings.TrimSpace(args) {
				t.Fatalf("parseCommand(%q) = %q, %q", m.Text, name, args)
			}
			if tok := strings.Fields(args); len(tok) > 0 && validToken(tok[0]) && len(tok[0]) > 64 {
				t.Fatalf("a token of %d characters passed", len(tok[0]))
			}
		}
		if m.Contact != nil {
			if e, err := phone.Normalize(m.Contact.PhoneNumber); err == nil && !e164Pattern.MatchString(e) {
				t.Fatalf("Normalize(%q) = %q, not E.164", m.Contact.PhoneNumber, e)
			}
		}
	})
}
