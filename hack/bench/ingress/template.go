package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/template"
)

// benchTemplate is the template of -template: html, about 1 KB, 10 outputs and a loop (issue 36's measure).
const benchTemplate = `<b>Order {{ order.id }}</b> is on its way, {{ customer.first_name | capitalize }}!
Shipped {{ order.shipped_at | date: "%d %b %Y" }} by {{ carrier.name }}; tracking <code>{{ carrier.tracking }}</code>.
{% for item in order.items limit: 5 %}• {{ item.quantity }} × {{ item.name | truncate: 40 }} — {{ item.price }} {{ order.currency }}
{% endfor %}Total: <b>{{ order.total }} {{ order.currency }}</b>. Delivery to {{ address.city }} expected {{ order.eta | default: "soon" }}.
<i>Questions? Reply to this chat or write to {{ support.email }}.</i> We are glad you shop with us and we hope everything
arrives in good order; if anything is missing or damaged, tell us within fourteen days and we will put it right at once,
free of charge. Thank you for your order, and see you soon at our shop. Your friends at the shop.`

func seedTemplate(ctx context.Context, st *store.Store) error {
	locales, _ := json.Marshal(map[string]any{"en": map[string]string{"message": benchTemplate}})
	_, _, err := st.SaveTemplate(ctx, "bench", store.Template{Name: "order.shipped", Format: "html", DefaultLocale: "en", Locales: locales})
	return err
}

// benchZones are the zones -zoned gives users, in turn.
var benchZones = []string{"Europe/Berlin", "America/Sao_Paulo", "Asia/Tokyo", "Europe/Lisbon", "America/New_York"}

// seedZones gives every (1/share)th user a time_zone, as PATCH /v1/users does, and returns how many.
func seedZones(ctx context.Context, st *store.Store, users int, share float64) (int, error) {
	if share <= 0 {
		return 0, nil
	}
	n := 0
	for i := 0; i < users; i++ {
		if int(float64(i)*share) == int(float64(i+1)*share) {
			continue
		}
		zone := benchZones[n%len(benchZones)]
		if _, _, err := st.SetUserSettings(ctx, "bench", "user-"+strconv.Itoa(i), store.UserSettings{SetTimeZone: true, TimeZone: &zone}); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// benchData is send i's data.
func benchData(i int) []byte {
	return fmt.Appendf(nil, `{"order": {"id": "A-%d", "shipped_at": "2026-03-01T10:00:00Z", "currency": "EUR", "total": "129.90", "eta": null,
"items": [{"quantity": 1, "name": "Kettle <steel>", "price": "49.90"}, {"quantity": 2, "name": "Mug & saucer", "price": "40.00"}, {"quantity": 1, "name": "Tea", "price": "0.00"}]},
"customer": {"first_name": "ana"}, "carrier": {"name": "DHL", "tracking": "JD%d"}, "address": {"city": "Porto"}, "support": {"email": "help@shop.example"}}`, i, i)
}

var benchSet = func() *template.Set {
	s, err := template.Compile(true, "en", map[string]template.LocaleSource{"en": {Message: benchTemplate}})
	if err != nil {
		panic(err)
	}
	return s
}()

// benchVariants is how many different orders the sends take turns with: their data and rendered messages
// are made once, before the phases, so that the bench's own work (sharing the machine with the ingress) is
// the same in both runs.
const benchVariants = 1024

var benchParts = struct{ data, rendered [benchVariants][]byte }{}

func init() {
	for i := range benchVariants {
		data := benchData(i)
		benchParts.data[i] = data
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			panic(err)
		}
		out, err := benchSet.Render("en", m, template.Options{})
		if err != nil {
			panic(err)
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(out.Message)
		benchParts.rendered[i] = bytes.TrimSpace(b.Bytes())
	}
}

// templatedSend is send i's body: the template and its data, or (the control) the message they render.
func templatedSend(i, users int, byTemplate bool) []byte {
	if byTemplate {
		return fmt.Appendf(nil, `{"user_id":"user-%d","template":"order.shipped","data":%s,"priority":%d}`, i%users, benchParts.data[i%benchVariants], i%10)
	}
	return fmt.Appendf(nil, `{"user_id":"user-%d","format":"html","message":%s,"priority":%d}`, i%users, benchParts.rendered[i%benchVariants], i%10)
}
