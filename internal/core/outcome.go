package core

import "strconv"

// Kind is what became of a callback that reached the service.
// internal/httpapi maps each Kind to its HTTP status and body in one
// table; the refusals that only HTTP produces (bad body, size, nonce,
// route) are its own.
type Kind int

// The outcomes the service produces.
const (
	KindInternal   Kind = iota // 500, no detail
	KindCreated                // 200 created
	KindDuplicate              // 200 stored result + deduplicated:true
	KindFound                  // 200 get_ticket answer
	KindInProgress             // 200 pending operation
	KindBusy                   // 200 busy, retryable
	KindRejected               // 200 correctable input error
	KindConflict               // 403 request_id_conflict
	KindForbidden              // 403 unknown or disabled user
)

var kindNames = [...]string{
	KindInternal:   "internal",
	KindCreated:    "created",
	KindDuplicate:  "deduplicated",
	KindFound:      "found",
	KindInProgress: "in_progress",
	KindBusy:       "busy",
	KindRejected:   "rejected",
	KindConflict:   "conflict",
	KindForbidden:  "forbidden",
}

// String names the kind as responses and logs do ("created",
// "deduplicated", "in_progress", ...); a conflict is "conflict".
func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Rejection codes.
const (
	CodeUnknownFunction       = "unknown_function"
	CodeMissingExternalUserID = "missing_external_user_id"
	CodeMissingRequestID      = "missing_request_id"
	CodeInvalidRequestID      = "invalid_request_id"
	CodeInvalidArguments      = "invalid_arguments"
	CodeArgumentsMismatch     = "arguments_mismatch"
	CodeRequestIDConflict     = "request_id_conflict"
	CodeTicketNotFound        = "ticket_not_found"
)

// Outcome is what happened to one callback: the answer, and how far the
// call got (function, tenant, key), which the caller logs.
type Outcome struct {
	Kind    Kind
	Code    string // rejection code
	Message string // for the model: what happened and what to do next

	Result *Result     // created and duplicate: create_ticket's answer
	Ticket *TicketView // found

	// What the call resolved to, as far as it got; never sent.
	Function string // the function named by the call
	TenantID string // once the user is known
	Key      string // once the operation key is derived
	Err      error  // the cause of a busy or internal outcome
}

// Result is create_ticket's answer. The operation stores it (as JSON,
// with Deduplicated false) in the same transaction as the ticket, and
// every repeat replays it with Deduplicated true: the replay is the
// original answer but for that member.
type Result struct {
	Status       string `json:"status"`
	TicketID     string `json:"ticket_id"`
	Deduplicated bool   `json:"deduplicated"`
}

// TicketView is what get_ticket returns of a ticket.
type TicketView struct {
	TicketID    string `json:"ticket_id"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Priority    string `json:"priority"`
	CreatedAt   string `json:"created_at"`
	// Delivery is absent for a ticket with no delivery state.
	Delivery *DeliveryView `json:"delivery,omitempty"`
}

// DeliveryView is get_ticket's view of a ticket's delivery: the helpdesk's
// id and URL only once delivered.
type DeliveryView struct {
	State       string `json:"state"`
	ExternalID  string `json:"external_id,omitempty"`
	ExternalURL string `json:"external_url,omitempty"`
}

// Reject builds a correctable-input rejection.
func Reject(code, message string) Outcome {
	return Outcome{Kind: KindRejected, Code: code, Message: message}
}

// TicketID is the ticket of a created or duplicate outcome, "" for any
// other.
func (o Outcome) TicketID() string {
	if o.Result == nil {
		return ""
	}
	return o.Result.TicketID
}
