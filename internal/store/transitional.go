package store

import "github.com/heraldhq/herald/internal/notification"

// The notification lifecycle's names as the store exported them before they moved to internal/notification,
// for the callers not yet moved (internal/delivery, and tests).

// Status is notification.Status.
// Transitional alias (issue 27): the lead removes it.
type Status = notification.Status

// The states.
// Transitional alias (issue 27): the lead removes it.
const (
	StatusScheduled  = notification.Scheduled
	StatusQueued     = notification.Queued
	StatusDelivering = notification.Delivering
	StatusDelivered  = notification.Delivered
	StatusRetrying   = notification.Retrying
	StatusBlocked    = notification.Blocked
	StatusFailed     = notification.Failed
	StatusUnlinked   = notification.Unlinked
	StatusCancelled  = notification.Cancelled
	StatusExpired    = notification.Expired
)

// Statuses is notification.Statuses.
// Transitional alias (issue 27): the lead removes it.
var Statuses = notification.Statuses

// ParseStatus is notification.ParseStatus.
// Transitional alias (issue 27): the lead removes it.
func ParseStatus(s string) (Status, bool) { return notification.ParseStatus(s) }

// The kinds.
// Transitional alias (issue 27): the lead removes it.
const (
	KindTenant = notification.KindTenant
	KindSystem = notification.KindSystem
)

// NotificationView is notification.View.
// Transitional alias (issue 27): the lead removes it.
type NotificationView = notification.View

// Delivery is notification.Delivery.
// Transitional alias (issue 27): the lead removes it.
type Delivery = notification.Delivery

// DeliveryResult is notification.DeliveryResult.
// Transitional alias (issue 27): the lead removes it.
type DeliveryResult = notification.DeliveryResult

// CodeRelinked and RelinkedMessage are notification's.
// Transitional alias (issue 27): the lead removes it.
const (
	CodeRelinked    = notification.CodeRelinked
	RelinkedMessage = notification.RelinkedMessage
)
