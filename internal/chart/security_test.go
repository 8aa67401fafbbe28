package chart

import (
	"encoding/base64"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Herald refuses webhook secrets shorter than 16 characters at start; the chart refuses them at install,
// and what it generates is long enough.
func TestTheWebhookSecretIsAtLeast16Characters(t *testing.T) {
	_, err := helm(t, templateArgs(valueSets[0], "secrets.webhookSecret.value=short_secret")...)
	if err == nil || !strings.Contains(err.Error(), "secrets.webhookSecret.value must be 16-256 characters") {
		t.Errorf("a 12-character webhook secret: %v, want the render to fail saying so", err)
	}
	objs := objects(t, render(t, valueSets[0]))
	s := find(objs, "Secret", fullname(objs))
	if s == nil {
		t.Fatal("no chart-made Secret")
	}
	data, _, _ := unstructured.NestedStringMap(s.Object, "data")
	b, err := base64.StdEncoding.DecodeString(data["webhook-secret"])
	if err != nil {
		t.Fatal(err)
	}
	raw := string(b)
	if len(raw) < 16 || strings.Trim(raw, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
		t.Errorf("the generated webhook secret has %d characters (%q…), want 16-256 of A-Za-z0-9_-", len(raw), raw[:min(4, len(raw))])
	}
}
