package main

import (
	"io"
	"testing"

	"github.com/heraldhq/herald/internal/store"
)

// The defaults of HERALD_RETENTION_* are store.DefaultRetention, which herald dev falls back on.
func TestRetentionDefaultsAreTheStoresDefaults(t *testing.T) {
	for _, env := range []string{"HERALD_RETENTION_BODY_DAYS", "HERALD_RETENTION_NOTIFICATION_DAYS", "HERALD_RETENTION_EXPIRED"} {
		t.Setenv(env, "")
	}
	var c cli
	if _, err := newParser(&c, io.Discard, io.Discard).Parse([]string{"dev"}); err != nil {
		t.Fatal(err)
	}
	if got := retentionPolicy(&c.Dev.Retention); got != store.DefaultRetention {
		t.Errorf("the settings' defaults give %+v, store.DefaultRetention is %+v", got, store.DefaultRetention)
	}
}
