package ingress

import (
	"testing"
	"time"
)

// An Idempotency-Key's meaning of a send that names no category is byte for byte what it was before the
// category existed, so the keys recorded then still match their repeats; a category makes it another one.
func TestASendWithoutACategoryMeansWhatItMeantBefore(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		got, want string
	}{
		{string(sendMeaning("u1", "hi", 5, nil, nil, nil, "")), `["u1","hi",5]`},
		{string(sendMeaning("u1", "hi", 5, map[string]string{"b": "2", "a": "1"}, &at, nil, "")), `["u1","hi",5,{"a":"1","b":"2"},"2026-01-02T03:04:05Z",null]`},
		{string(sendMeaning("u1", "hi", 5, nil, nil, nil, "promo")), `["u1","hi",5,null,null,null,"promo"]`},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("meaning %s, want %s", c.got, c.want)
		}
	}
}
