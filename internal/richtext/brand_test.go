package richtext

import (
	"reflect"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/brand"
)

func TestBrand(t *testing.T) {
	m, err := ParseHTML(`<b>Order #1042</b> <a href="https://shop.example">track</a>`)
	if err != nil {
		t.Fatal(err)
	}
	kept := append([]Entity(nil), m.Entities...)
	got, fits := Brand("Acme 😀", m)

	const line = "A message from Acme 😀\n" // 😀 is two UTF-16 units: the shift is 23, not 22
	if got.Text != line+"Order #1042 track" {
		t.Fatalf("text %q", got.Text)
	}
	want := []Entity{e(Bold, 23, 11), link(35, 5, "https://shop.example")}
	if !reflect.DeepEqual(got.Entities, want) {
		t.Fatalf("entities %+v, want %+v", got.Entities, want)
	}
	if !fits {
		t.Fatal("a short message does not fit")
	}
	if !reflect.DeepEqual(m.Entities, kept) {
		t.Fatalf("Brand changed the tenant's entities: %+v", m.Entities)
	}
	if err := Validate(got); err != nil {
		t.Fatalf("the branded message is not valid: %v", err)
	}
	if h, _ := RenderHTML(got); !strings.HasPrefix(h, "A message from Acme 😀\n<b>") {
		t.Fatalf("the brand line is not plain: %q", h)
	}
}

// The brand line is the internal/brand one, before the tenant's text, and no entity reaches into it:
// whatever the label holds, it stays plain text, and the tenant's markup cannot close or restyle it.
func TestBrandLineStaysPlain(t *testing.T) {
	for _, label := range []string{"Acme", "<b>Acme</b>", "Acme</b><i>", "&amp;", ""} {
		for _, in := range []string{"x", "<b>x</b>", "<blockquote><b>x</b></blockquote>", "<i></i>y"} {
			m, err := ParseHTML(in)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := Brand(label, m)
			line := brand.Render(label, "")
			if got.Text != brand.Render(label, m.Text) {
				t.Fatalf("text %q is not brand.Render's", got.Text)
			}
			for _, ent := range got.Entities {
				if ent.Offset < UTF16Len(line) {
					t.Fatalf("label %q, markup %q: entity %+v reaches into the brand line %q", label, in, ent, line)
				}
			}
		}
	}
	// Markup that tries to close something before it is refused at the door.
	for _, in := range []string{"</b>x", "</blockquote>x", "</a>x"} {
		if _, err := ParseHTML(in); err == nil {
			t.Fatalf("ParseHTML(%q) accepted an end tag with nothing open", in)
		}
	}
}

func TestBrandFits(t *testing.T) {
	line := UTF16Len(brand.Render("Acme", ""))
	lineChars := brand.Length(brand.Render("Acme", ""))
	// Emoji are one character for the limit but two UTF-16 units: the limit counts characters.
	for _, c := range []struct {
		chars int
		fits  bool
	}{{brand.MaxLength - lineChars, true}, {brand.MaxLength - lineChars + 1, false}} {
		m, err := ParseHTML("<b>" + strings.Repeat("😀", c.chars) + "</b>")
		if err != nil {
			t.Fatal(err)
		}
		got, fits := Brand("Acme", m)
		if fits != c.fits {
			t.Errorf("%d characters after the brand: fits %v, want %v", c.chars, fits, c.fits)
		}
		if got.Entities[0].Offset != line || got.Entities[0].Length != 2*c.chars {
			t.Errorf("entity %+v", got.Entities[0])
		}
		if err := Validate(got); (err == nil) != c.fits {
			t.Errorf("Validate(%d characters after the brand) = %v", c.chars, err)
		}
	}
}
