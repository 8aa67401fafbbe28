package chart

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/signing"
)

// Tenants' own bots: the chart makes a bot token key herald accepts, and gives it, from the Secret, to the
// components that seal and open the tokens (operator, webhook, worker) and to no other; the operator gets
// the public URL and the Bot API URL it registers bots with.
func TestTheBotTokenKeyGoesToTheComponentsThatUseIt(t *testing.T) {
	objs := objects(t, render(t, valueSet{"defaults", ""}, "messenger.publicURL=https://herald.example.com"))
	found := false
	for _, s := range ofKind(objs, "Secret") {
		data, _ := s.Object["data"].(map[string]any)
		v, ok := data["bot-token-key"].(string)
		if !ok {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := signing.ParseKey(string(raw)); err != nil {
			t.Errorf("the generated bot-token-key: %v", err)
		}
		found = true
	}
	if !found {
		t.Fatal("the defaults make no bot-token-key")
	}
	want := map[string]bool{"operator": true, "webhook": true, "worker": true, "ingress": false, "callbacks": false}
	for _, d := range ofKind(objs, "Deployment") {
		component := d.GetName()[strings.LastIndex(d.GetName(), "-")+1:]
		uses, known := want[component]
		if !known {
			continue
		}
		c := containers(t, podSpec(t, d))[0]
		key := envVar(c, "HERALD_BOT_TOKEN_KEY")
		if (key != nil) != uses {
			t.Errorf("%s: HERALD_BOT_TOKEN_KEY %v, want it %v", component, key, uses)
		}
		if key != nil && !strings.Contains(fmt.Sprint(key["valueFrom"]), "key:bot-token-key") {
			t.Errorf("%s: HERALD_BOT_TOKEN_KEY is not read from the Secret: %v", component, key)
		}
		if component == "operator" {
			if v := envVar(c, "HERALD_PUBLIC_URL"); v == nil || v["value"] != "https://herald.example.com" {
				t.Errorf("operator: HERALD_PUBLIC_URL %v", v)
			}
			if v := envVar(c, "HERALD_MESSENGER_API_URL"); v == nil || v["value"] != "https://api.telegram.org" {
				t.Errorf("operator: HERALD_MESSENGER_API_URL %v", v)
			}
		}
	}
	// Left empty, the public URL is not passed: the operator then reports bots as not configured.
	for _, d := range ofKind(objects(t, render(t, valueSet{"defaults", ""})), "Deployment") {
		if c := containers(t, podSpec(t, d))[0]; envVar(c, "HERALD_PUBLIC_URL") != nil {
			t.Errorf("%s gets HERALD_PUBLIC_URL without messenger.publicURL", d.GetName())
		}
	}
}
