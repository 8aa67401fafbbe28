package devenv

import (
	"fmt"
	"io"
	"strings"
)

// printWalkthrough prints the copy-paste tour of the gateway.
func printWalkthrough(w io.Writer, base, key string, simulated bool) {
	if key == "" {
		key = "<your key: herald apikey create --tenant demo>"
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("")
	p("Herald is running on %s — the tenant API, the webhook%s on one port.", base, map[bool]string{true: " and the messenger simulator", false: ""}[simulated])
	p("Stop it with Ctrl-C. Data is kept in .dev/ between runs.")
	p("")
	p("Walkthrough (copy-paste into a shell; needs curl and jq):")
	p("")
	p("  export HERALD=%s KEY=%s", base, key)
	p("  auth=(-H \"Authorization: Bearer $KEY\" -H 'Content-Type: application/json')")
	p("")
	p("  # 1. A link token for your user 'alice', and its deep link:")
	p("  LINK=$(curl -s \"${auth[@]}\" -d '{\"user_id\":\"alice\"}' $HERALD/v1/link-token | jq -r .deep_link); echo $LINK")
	if simulated {
		p("")
		p("  # 2. Simulated messenger user 1001 opens the deep link (sends /start <token> to the bot):")
		p("  curl -s -d \"{\\\"url\\\":\\\"$LINK\\\"}\" $HERALD/sim/users/1001/open-link")
		p("")
		p("  # 3. Start phone verification; the user shares their own contact:")
		p("  curl -s \"${auth[@]}\" -d '{\"user_id\":\"alice\"}' $HERALD/v1/phone-verification/start")
		p("  curl -s -d '{\"phone_number\":\"+15551234567\"}' $HERALD/sim/users/1001/share-contact")
		p("  curl -s \"${auth[@]}\" $HERALD/v1/phone-verification/status/alice")
	} else {
		p("")
		p("  # 2. Open $LINK in the messenger, then start phone verification and share your contact:")
		p("  curl -s \"${auth[@]}\" -d '{\"user_id\":\"alice\"}' $HERALD/v1/phone-verification/start")
		p("  curl -s \"${auth[@]}\" $HERALD/v1/phone-verification/status/alice")
	}
	p("")
	p("  # 4. Send, and read the delivery status:")
	p("  ID=$(curl -s \"${auth[@]}\" -d '{\"user_id\":\"alice\",\"message\":\"Your order has shipped\"}' $HERALD/v1/send | jq -r .tracking_id)")
	p("  sleep 1; curl -s \"${auth[@]}\" $HERALD/v1/status/$ID")
	if simulated {
		p("")
		p("  # 5. What the user's chat received:")
		p("  curl -s $HERALD/sim/chats/1001/messages | jq -r '.messages[].text'")
	}
	p("")
	_, _ = io.WriteString(w, b.String())
}
