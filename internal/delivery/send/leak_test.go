package send_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/delivery/send"
	"github.com/heraldhq/herald/internal/messenger"
)

// The state machine records what tenants may read and keeps the full error for the log.
func TestDecisionsRecordNoInternalAddressButKeepTheCause(t *testing.T) {
	cause := &messenger.TransportError{Method: "sendMessage", Code: messenger.CodeNetwork,
		Err: errors.New(`Post "http://egress.corp.internal:3128/bot<token>/sendMessage": dial tcp 10.1.2.3:3128: connect: connection refused`)}
	for _, attempts := range []int{1, 8} { // a retry, and the last attempt (failed)
		d := send.Decide(0, cause, attempts, 8, send.DefaultBackoff, false)
		if m := d.Result.ErrorMessage; strings.Contains(m, "egress") || strings.Contains(m, "10.1.2.3") || strings.Contains(m, "3128") {
			t.Errorf("attempt %d records last_error_message %q", attempts, m)
		}
		if d.Result.ErrorCode != messenger.CodeNetwork || !errors.Is(d.Cause, cause) {
			t.Errorf("attempt %d: code %d, cause %v; want %d and the full error", attempts, d.Result.ErrorCode, d.Cause, messenger.CodeNetwork)
		}
	}
}
