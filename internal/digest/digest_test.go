package digest_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/brand"
	"github.com/heraldhq/herald/internal/digest"
	"github.com/heraldhq/herald/internal/richtext"
)

func branded(label, markup string) digest.Item {
	m, err := richtext.ParseHTML(markup)
	if err != nil {
		panic(err)
	}
	b, _ := richtext.Brand(label, m)
	return digest.Item{Body: b.Text, Entities: b.Entities}
}

// Texts in order, a blank line between them, one brand line (the first item's), entities shifted to
// where their text now is.
func TestComposeJoinsInOrderUnderOneBrandLine(t *testing.T) {
	got := digest.Compose([]digest.Item{
		branded("Acme", "New comment by <b>Ann</b>"),
		branded("Acme Shop", "😀 <i>Bob</i> replied"),
		{Body: brand.Render("Acme", "plain")},
	})
	want := "A message from Acme\nNew comment by Ann\n\n😀 Bob replied\n\nplain"
	if got.Text != want || got.Shown != 3 {
		t.Fatalf("text %q (shown %d), want %q", got.Text, got.Shown, want)
	}
	line := richtext.UTF16Len("A message from Acme\n")
	wantEnts := []richtext.Entity{
		{Type: richtext.Bold, Offset: line + 15, Length: 3},
		{Type: richtext.Italic, Offset: line + 18 + 2 + 3, Length: 3}, // after "\n\n" and 😀 (2 units) and a space
	}
	if !reflect.DeepEqual(got.Entities, wantEnts) {
		t.Fatalf("entities %+v, want %+v", got.Entities, wantEnts)
	}
	if err := richtext.Validate(richtext.Message{Text: got.Text, Entities: got.Entities}); err != nil {
		t.Fatalf("the composed message is not valid: %v", err)
	}
}

// What does not fit 4,096 characters ends the message with "… and N more", which fits too.
func TestComposeOverflowEndsWithAndNMore(t *testing.T) {
	var items []digest.Item
	for i := range 5 {
		items = append(items, digest.Item{Body: brand.Render("Acme", fmt.Sprintf("%d", i)+strings.Repeat("x", 1499))})
	}
	got := digest.Compose(items)
	if got.Shown != 2 || !strings.HasSuffix(got.Text, "\n\n… and 3 more") || brand.Length(got.Text) > brand.MaxLength {
		t.Fatalf("shown %d, length %d, ends %q", got.Shown, brand.Length(got.Text), got.Text[len(got.Text)-20:])
	}
	// One item that alone fills the message is cut to leave room for the line.
	long := []digest.Item{branded("Acme", "<b>"+strings.Repeat("y", 4076)+"</b>"), {Body: brand.Render("Acme", "next")}}
	got = digest.Compose(long)
	if got.Shown != 1 || !strings.HasSuffix(got.Text, "… and 1 more") || brand.Length(got.Text) != brand.MaxLength {
		t.Fatalf("a long first item: shown %d, length %d", got.Shown, brand.Length(got.Text))
	}
	if err := richtext.Validate(richtext.Message{Text: got.Text, Entities: got.Entities}); err != nil {
		t.Fatalf("the cut message is not valid: %v", err)
	}
	// Entities count too: past 100, the rest is "more".
	var many []digest.Item
	for range 3 {
		many = append(many, branded("Acme", strings.Repeat("<b>a</b> ", 40)))
	}
	if got := digest.Compose(many); got.Shown != 2 || len(got.Entities) != 80 || !strings.HasSuffix(got.Text, "… and 1 more") {
		t.Fatalf("entities: shown %d, %d entities", got.Shown, len(got.Entities))
	}
}
