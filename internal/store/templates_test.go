package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/heraldhq/herald/internal/store"
)

func TestTemplateVersionsIdenticalSavesDeleteAndList(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	save := func(name, locales string) (store.Template, bool) {
		t.Helper()
		v, created, err := s.SaveTemplate(ctx, "acme", store.Template{Name: name, Format: "text", DefaultLocale: "en", Locales: json.RawMessage(locales)})
		if err != nil {
			t.Fatal(err)
		}
		return v, created
	}
	if v, created := save("order", `{"en": {"message": "Hi {{ name }}"}}`); !created || v.Version != 1 {
		t.Fatalf("first save: version %d created %v, want 1 true", v.Version, created)
	}
	// The same content in another key order and spacing is identical: no new version.
	if v, created := save("order", `{"en":{"message":"Hi {{ name }}"}}`); created || v.Version != 1 {
		t.Fatalf("identical save: version %d created %v, want 1 false", v.Version, created)
	}
	if v, created := save("order", `{"en": {"message": "Hello {{ name }}"}, "de": {"message": "Hallo {{ name }}"}}`); !created || v.Version != 2 {
		t.Fatalf("changed save: version %d created %v, want 2 true", v.Version, created)
	}
	if v, err := s.GetTemplate(ctx, "acme", "order", 1); err != nil || v.Version != 1 || string(v.Locales) != `{"en": {"message": "Hi {{ name }}"}}` {
		t.Fatalf("version 1: %+v %v", v, err)
	}
	if v, err := s.GetTemplate(ctx, "acme", "order", 0); err != nil || v.Version != 2 {
		t.Fatalf("latest: %+v %v", v, err)
	}
	// Another tenant sees none of it.
	if err := s.CreateTenant(ctx, "globex", "Globex"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetTemplate(ctx, "globex", "order", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another tenant's template: %v, want ErrNotFound", err)
	}
	save("alpha", `{"en": {"message": "a"}}`)
	list, err := s.ListTemplates(ctx, "acme", "", 10)
	if err != nil || len(list) != 2 || list[0].Name != "alpha" || list[1].Name != "order" || list[1].Version != 2 ||
		!slices.Equal(list[1].LocaleTags, []string{"de", "en"}) {
		t.Fatalf("list: %+v %v", list, err)
	}
	if page, err := s.ListTemplates(ctx, "acme", "alpha", 10); err != nil || len(page) != 1 || page[0].Name != "order" {
		t.Fatalf("list after alpha: %+v %v", page, err)
	}
	if err := s.DeleteTemplate(ctx, "acme", "order"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTemplate(ctx, "acme", "order"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	for _, version := range []int{0, 1, 2} {
		if _, err := s.GetTemplate(ctx, "acme", "order", version); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("version %d after delete: %v, want ErrNotFound", version, err)
		}
	}
	// A save after the deletion continues the count: version 2 never names two contents.
	if v, created := save("order", `{"en": {"message": "Hi {{ name }}"}}`); !created || v.Version != 3 {
		t.Fatalf("save after delete: version %d created %v, want 3 true", v.Version, created)
	}
}

func TestUserSettingsBeforeLinkingAndErasure(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	de, berlin := "de", "Europe/Berlin"
	u, _, err := s.SetUserSettings(ctx, "acme", "newcomer", store.UserSettings{SetLocale: true, Locale: &de, SetTimeZone: true, TimeZone: &berlin})
	if err != nil || u.LinkedAt != nil || u.Locale == nil || *u.Locale != "de" || u.TimeZone == nil || *u.TimeZone != berlin {
		t.Fatalf("settings of a user not linked: %+v %v", u, err)
	}
	// Only the field given changes; null clears.
	u, _, err = s.SetUserSettings(ctx, "acme", "newcomer", store.UserSettings{SetLocale: true})
	if err != nil || u.Locale != nil || u.TimeZone == nil {
		t.Fatalf("clearing the locale: %+v %v", u, err)
	}
	// The messenger's language of the user's chat (chat 1 of user "ok", the shared bot).
	exec(t, s, `INSERT INTO chat_languages (bot_id, chat_id, language_code) VALUES (0, 1, 'pt-br')`)
	if _, _, err := s.SetUserSettings(ctx, "acme", "ok", store.UserSettings{SetLocale: true, Locale: &de}); err != nil {
		t.Fatal(err)
	}
	// Another tenant's user of the same id, read in the same statement, is its own.
	if err := s.CreateTenant(ctx, "globex", "Globex"); err != nil {
		t.Fatal(err)
	}
	fr := "fr"
	if _, _, err := s.SetUserSettings(ctx, "globex", "ok", store.UserSettings{SetLocale: true, Locale: &fr}); err != nil {
		t.Fatal(err)
	}
	acme := func(id string) store.TenantUser { return store.TenantUser{TenantID: "acme", UserID: id} }
	globexOK := store.TenantUser{TenantID: "globex", UserID: "ok"}
	locales, err := s.UserLocales(ctx, []store.TenantUser{acme("ok"), acme("newcomer"), acme("stranger"), globexOK})
	if err != nil || locales[acme("ok")] != (store.UserLocale{Locale: "de", MessengerLanguage: "pt-br"}) ||
		locales[acme("newcomer")] != (store.UserLocale{TimeZone: "Europe/Berlin"}) || locales[globexOK] != (store.UserLocale{Locale: "fr"}) || len(locales) != 3 {
		t.Fatalf("locales: %+v %v", locales, err)
	}
	if u, err := s.GetUser(ctx, "acme", "ok"); err != nil || u.MessengerLanguage == nil || *u.MessengerLanguage != "pt-br" {
		t.Fatalf("user: %+v %v", u, err)
	}
	e, err := s.EraseUser(ctx, "acme", "ok")
	if err != nil || e.ChatLanguages != 1 {
		t.Fatalf("erasure: %+v %v", e, err)
	}
	if n := count(t, s, `SELECT count(*) FROM chat_languages WHERE chat_id = 1`); n != 0 {
		t.Fatalf("the chat's language survived the erasure")
	}
	if _, err := s.GetUser(ctx, "acme", "ok"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("erased user: %v", err)
	}
}

func TestApplyUpdatesRecordsTheLatestLanguageOfEachChat(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	effects := []*store.Effect{
		{UpdateID: 10, ChatID: 5, Language: "en"},
		{UpdateID: 11, ChatID: 5, Language: "pt-BR"}, // the later update of the chat wins
		{UpdateID: 12, ChatID: 6},                    // no language reported: nothing recorded
	}
	if err := s.ApplyUpdates(ctx, effects); err != nil {
		t.Fatal(err)
	}
	var code string
	if err := s.Pool().QueryRow(ctx, `SELECT language_code FROM chat_languages WHERE bot_id = 0 AND chat_id = 5`).Scan(&code); err != nil || code != "pt-BR" {
		t.Fatalf("chat 5: %q %v", code, err)
	}
	// A repeated update takes no effect, its language included.
	if err := s.ApplyUpdates(ctx, []*store.Effect{{UpdateID: 10, ChatID: 5, Language: "fr"}}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, `SELECT count(*) FROM chat_languages WHERE language_code = 'pt-BR'`); n != 1 {
		t.Fatal("a repeated update changed the language")
	}
	if n := count(t, s, `SELECT count(*) FROM chat_languages WHERE chat_id = 6`); n != 0 {
		t.Fatal("an update without a language recorded one")
	}
}
