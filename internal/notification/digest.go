package notification

import "time"

// Digest is a send's digest option (spec v1-extensions §14): the notifications with one tenant, user and
// Key accepted within Window of the first are delivered as one message, when the window ends or MaxItems
// have joined.
type Digest struct {
	Key      string
	Window   time.Duration
	MaxItems int
}

// DigestItem is one notification of a digest that a worker gathered to send as one message: what it needs
// to compose the message (Body, Entities: as stored) and to finish the item under its own attempt.
type DigestItem struct {
	TrackingID string
	Attempts   int
	Position   int // from 1, in the order accepted
	Body       string
	Entities   string // compact form, "" for none
}
