package devenv

import (
	"fmt"
	"io"
	"strings"
)

// walkthrough is what the printed tour needs to know.
type walkthrough struct {
	Base        string // the API base, http://127.0.0.1:8080
	Key         string // the demo key
	Simulated   bool   // the simulator plays the messenger
	DatabaseURL string
	DataDir     string
	// ShopKey and ShopBot are the second demo tenant's key and its own bot's username; ShopBot is empty when
	// there is no such tenant (a real messenger).
	ShopKey string
	ShopBot string
}

// printWalkthrough prints the copy-paste tour of the gateway. Every step can be pasted as soon as the
// previous one has answered: the simulator's user actions answer once Herald has handled them.
func printWalkthrough(w io.Writer, t walkthrough) {
	key := t.Key
	if key == "" {
		key = "<your key: herald apikey create --tenant demo>"
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("")
	p("Herald is running on %s — the tenant API, the webhook%s on one port.", t.Base, map[bool]string{true: " and the messenger simulator", false: ""}[t.Simulated])
	p("Dev console: %s/ (open it in a browser)", t.Base)
	p("PostgreSQL:  %s", t.DatabaseURL)
	p("             (eval \"$(herald dev --print-env)\" exports it for the admin CLI, with HERALD and KEY below)")
	p("Stop it with Ctrl-C. Data is kept in %s/ between runs.", t.DataDir)
	p("")
	p("Walkthrough (copy-paste into a shell; needs curl and jq):")
	p("")
	p("  export HERALD=%s KEY=%s", t.Base, key)
	p("  json=(-H 'Content-Type: application/json')   # the simulator, too, takes only JSON")
	p("  auth=(-H \"Authorization: Bearer $KEY\" \"${json[@]}\")")
	p("")
	p("  # 1. A link token for your user 'alice', and its deep link:")
	p("  LINK=$(curl -s \"${auth[@]}\" -d '{\"user_id\":\"alice\"}' $HERALD/v1/link-token | jq -r .deep_link); echo $LINK")
	if t.Simulated {
		p("")
		p("  # 2. Simulated messenger user 1001 opens the deep link (sends /start <token> to the bot; the answer")
		p("  #    comes once Herald has handled it):")
		p("  curl -s \"${json[@]}\" -d \"{\\\"url\\\":\\\"$LINK\\\"}\" $HERALD/sim/users/1001/open-link")
		p("")
		p("  # 3. Start phone verification; the user shares their own contact:")
		p("  curl -s \"${auth[@]}\" -d '{\"user_id\":\"alice\"}' $HERALD/v1/phone-verification/start")
		p("  curl -s \"${json[@]}\" -d '{\"phone_number\":\"+15551234567\"}' $HERALD/sim/users/1001/share-contact")
		p("  curl -s \"${auth[@]}\" $HERALD/v1/phone-verification/status/alice")
	} else {
		p("")
		p("  # 2. Open $LINK in the messenger, then start phone verification and share your contact:")
		p("  curl -s \"${auth[@]}\" -d '{\"user_id\":\"alice\"}' $HERALD/v1/phone-verification/start")
		p("  curl -s \"${auth[@]}\" $HERALD/v1/phone-verification/status/alice")
	}
	p("")
	p("  # 4. Send, and wait until the delivery has ended. The platform takes about one message per second per")
	p("  #    chat, and this chat has just received three (linked, the prompt, verified): it waits its turn.")
	p("  ID=$(curl -s \"${auth[@]}\" -d '{\"user_id\":\"alice\",\"message\":\"Your order has shipped\"}' $HERALD/v1/send | jq -r .tracking_id)")
	p("  until curl -s \"${auth[@]}\" $HERALD/v1/status/$ID | jq -e '.status != \"queued\" and .status != \"delivering\"' >/dev/null; do sleep 0.2; done")
	p("  curl -s \"${auth[@]}\" $HERALD/v1/status/$ID")
	if t.Simulated {
		p("")
		p("  # 5. What the user's chat received:")
		p("  curl -s $HERALD/sim/chats/1001/messages | jq -r '.messages[].text'")
		p("")
		p("  # 6. Status callbacks: the simulator plays your receiver. Register it, ping it, send again, and watch")
		p("  #    the signed events arrive (verified: the signature checks out with the endpoint's secret). Run again,")
		p("  #    the registration answers the endpoint already there:")
		p("  CB=$(curl -s \"${auth[@]}\" -d \"{\\\"url\\\":\\\"$HERALD/sim/callbacks\\\"}\" $HERALD/v1/callbacks | jq -r .id)")
		p("  curl -s \"${auth[@]}\" -X POST $HERALD/v1/callbacks/$CB/test")
		p("  curl -s \"${auth[@]}\" -d '{\"user_id\":\"alice\",\"message\":\"And another\"}' $HERALD/v1/send")
		p("  sleep 2; curl -s $HERALD/sim/callbacks | jq -c '.callbacks[] | {type, verified, webhook_id}'")
	}
	if t.Simulated && t.ShopBot != "" {
		shopKey := t.ShopKey
		if shopKey == "" {
			shopKey = "<its key: herald apikey create --tenant shop>"
		}
		p("")
		p("  # 7. A second tenant, 'shop', has a bot of its own, @%s: its deep links open that bot, and its", t.ShopBot)
		p("  #    messages come from it. User 1001 links to it too, in a chat of its own beside the shared bot's:")
		p("  export SHOP_KEY=%s", shopKey)
		p("  shop=(-H \"Authorization: Bearer $SHOP_KEY\" \"${json[@]}\")")
		p("  LINK2=$(curl -s \"${shop[@]}\" -d '{\"user_id\":\"alice\"}' $HERALD/v1/link-token | jq -r .deep_link); echo $LINK2")
		p("  curl -s \"${json[@]}\" -d \"{\\\"url\\\":\\\"$LINK2\\\"}\" $HERALD/sim/users/1001/open-link")
		p("  curl -s \"${shop[@]}\" -d '{\"user_id\":\"alice\"}' $HERALD/v1/phone-verification/start")
		p("  curl -s \"${json[@]}\" -d '{\"phone_number\":\"+15551234567\"}' \"$HERALD/sim/users/1001/share-contact?bot=%s\"", t.ShopBot)
		p("  ID2=$(curl -s \"${shop[@]}\" -d '{\"user_id\":\"alice\",\"message\":\"Your table is booked\"}' $HERALD/v1/send | jq -r .tracking_id)")
		p("  until curl -s \"${shop[@]}\" $HERALD/v1/status/$ID2 | jq -e '.status != \"queued\" and .status != \"delivering\"' >/dev/null; do sleep 0.2; done")
		p("  curl -s \"${shop[@]}\" $HERALD/v1/status/$ID2")
		p("  curl -s \"$HERALD/sim/chats/1001/messages?bot=%s\" | jq -r '.messages[].text'", t.ShopBot)
	}
	if t.Simulated {
		step := 7
		if t.ShopBot != "" {
			step = 8
		}
		p("")
		p("  # %d. The user has had enough: /stop in the chat (one tenant here, so it stops at once; with several, a", step)
		p("  #    keyboard asks which). The tenant sees it, its next send is refused, and only the user's /resume lifts it:")
		p("  curl -s \"${json[@]}\" -d '{\"text\":\"/stop\"}' $HERALD/sim/users/1001/message")
		p("  curl -s \"${auth[@]}\" $HERALD/v1/users/alice | jq -c '{opted_out, opted_out_categories, blocked}'")
		p("  curl -s \"${auth[@]}\" -d '{\"user_id\":\"alice\",\"message\":\"A sale!\"}' $HERALD/v1/send   # 409 user_opted_out")
		p("  curl -s \"${json[@]}\" -d '{\"text\":\"/resume\"}' $HERALD/sim/users/1001/message")
		p("  curl -s \"${auth[@]}\" $HERALD/v1/users/alice | jq -c '{opted_out}'")
		p("")
		p("  # %d. Templates (docs/templates.md): save the text once, send only data. Herald renders it at once in the", step+1)
		p("  #    user's language — here the language_code the simulated user's messenger reports, en — escaping the data:")
		p("  curl -s \"${auth[@]}\" -X PUT -d '{\"format\":\"html\",\"default_locale\":\"en\",\"locales\":{\"en\":{\"message\":\"<b>Order {{ order.id }}</b> has shipped, {{ name }}\"},\"de\":{\"message\":\"<b>Bestellung {{ order.id }}</b> ist unterwegs, {{ name }}\"}}}' $HERALD/v1/templates/order.shipped | jq -c '{name, version}'")
		p("  ID3=$(curl -s \"${auth[@]}\" -d '{\"user_id\":\"alice\",\"template\":\"order.shipped\",\"data\":{\"order\":{\"id\":\"A-1001\"},\"name\":\"Alice & Bob\"}}' $HERALD/v1/send | jq -r .tracking_id)")
		p("  until curl -s \"${auth[@]}\" $HERALD/v1/status/$ID3 | jq -e '.status != \"queued\" and .status != \"delivering\"' >/dev/null; do sleep 0.2; done")
		p("  curl -s \"${auth[@]}\" $HERALD/v1/status/$ID3 | jq -c '{status, template}'")
		p("  curl -s $HERALD/sim/chats/1001/messages | jq -r '.messages[-1].text'")
	}
	p("")
	_, _ = io.WriteString(w, b.String())
}
