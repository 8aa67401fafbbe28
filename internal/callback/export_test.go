package callback

// Kill stops the sender as a crash would: attempts in flight are cut off and nothing more is written to
// PostgreSQL.
func (s *Sender) Kill() {
	s.killed.Store(true)
	s.kill()
}

// WebhookID is the webhook-id of an event id.
var WebhookID = webhookID

// The metrics, for tests.
var (
	Attempts         = attempts
	Dropped          = dropped
	QueueDepth       = queueDepth
	EndpointFailures = endpointFailures
	SecretsOldKey    = secretsOldKey
)
