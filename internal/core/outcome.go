package core

// Kind is what became of a callback. internal/httpapi maps each Kind to
// its HTTP status and body in one table.
type Kind int

// The outcomes of SPEC section 6.
const (
	KindInternal         Kind = iota // 500, no detail
	KindCreated                      // 200 created
	KindDuplicate                    // 200 stored result + deduplicated:true
	KindFound                        // 200 get_ticket answer
	KindInProgress                   // 200 pending operation
	KindBusy                         // 200 busy, retryable
	KindRejected                     // 200 correctable input error
	KindConflict                     // 403 request_id_conflict
	KindUnauthenticated              // 401
	KindForbidden                    // 403 unknown or disabled user
	KindBadRequest                   // 400
	KindTooLarge                     // 413
	KindNotFound                     // 404 no such route
	KindMethodNotAllowed             // 405
)

// Rejection codes (SPEC sections 3, 4 and 9).
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

// Outcome is the result of one callback, with what the log line needs.
type Outcome struct {
	Kind    Kind
	Code    string // rejection code
	Message string // for the model: what happened and what to do next

	TicketID string      // created
	Result   []byte      // duplicate: the stored result
	Ticket   *TicketView // found

	// For the log line only; never sent.
	Function string
	TenantID string
	Key      string
	Err      error
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
