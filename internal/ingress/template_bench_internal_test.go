package ingress

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/template"
)

// benchSource is bench-ingress's -template template (hack/bench/ingress/template.go): html, about 1 KB,
// 10 outputs and a loop.
const benchSource = `<b>Order {{ order.id }}</b> is on its way, {{ customer.first_name | capitalize }}!
Shipped {{ order.shipped_at | date: "%d %b %Y" }} by {{ carrier.name }}; tracking <code>{{ carrier.tracking }}</code>.
{% for item in order.items limit: 5 %}• {{ item.quantity }} × {{ item.name | truncate: 40 }} — {{ item.price }} {{ order.currency }}
{% endfor %}Total: <b>{{ order.total }} {{ order.currency }}</b>. Delivery to {{ address.city }} expected {{ order.eta | default: "soon" }}.
<i>Questions? Reply to this chat or write to {{ support.email }}.</i> We are glad you shop with us and we hope everything
arrives in good order; if anything is missing or damaged, tell us within fourteen days and we will put it right at once,
free of charge. Thank you for your order, and see you soon at our shop. Your friends at the shop.`

const benchData = `{"order": {"id": "A-1", "shipped_at": "2026-03-01T10:00:00Z", "currency": "EUR", "total": "129.90", "eta": null,
"items": [{"quantity": 1, "name": "Kettle <steel>", "price": "49.90"}, {"quantity": 2, "name": "Mug & saucer", "price": "40.00"}, {"quantity": 1, "name": "Tea", "price": "0.00"}]},
"customer": {"first_name": "ana"}, "carrier": {"name": "DHL", "tracking": "JD1"}, "address": {"city": "Porto"}, "support": {"email": "help@shop.example"}}`

// BenchmarkSendDoor measures what a send costs at the door, without the network and the database: the body
// decoded, then (templated) the data decoded, the template rendered from the cache, and every §10 rule on
// the result, against (rendered) the same message sent as html. The difference is the template's CPU cost
// per send; bench-ingress gives the whole send path's (docs/benchmarks.md).
func BenchmarkSendDoor(b *testing.B) {
	set, err := template.Compile(true, "en", map[string]template.LocaleSource{"en": {Message: benchSource}})
	if err != nil {
		b.Fatal(err)
	}
	cached := &cachedTemplate{row: store.Template{Name: "order.shipped", Version: 1, Format: notification.FormatHTML, DefaultLocale: "en"}, set: set}
	templatedBody := []byte(`{"user_id":"user-1","template":"order.shipped","data":` + benchData + `,"priority":5}`)
	var probe sendRequest
	if err := decodeStrict(templatedBody, &probe, "the body"); err != nil {
		b.Fatal(err)
	}
	f, err := parseTemplateFields(probe)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := renderTemplate(&probe, f, cached, store.UserLocale{}); err != nil {
		b.Fatal(err)
	}
	var msg bytes.Buffer
	enc := json.NewEncoder(&msg)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(*probe.Message)
	renderedBody := fmt.Appendf(nil, `{"user_id":"user-1","format":"html","message":%s,"priority":5}`, bytes.TrimSpace(msg.Bytes()))

	b.Run("rendered", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var req sendRequest
			if err := decodeStrict(renderedBody, &req, "the body"); err != nil {
				b.Fatal(err)
			}
			if _, err := validateSend(req, "Shop", time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("templated", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var req sendRequest
			if err := decodeStrict(templatedBody, &req, "the body"); err != nil {
				b.Fatal(err)
			}
			f, err := parseTemplateFields(req)
			if err != nil {
				b.Fatal(err)
			}
			tm, err := renderTemplate(&req, f, cached, store.UserLocale{})
			if err != nil {
				b.Fatal(err)
			}
			v, err := validateSend(req, "Shop", time.Now())
			if err != nil {
				b.Fatal(err)
			}
			_ = v.withTemplate(tm)
		}
	})
}
