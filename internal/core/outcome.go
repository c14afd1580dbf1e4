package core

import (
	"encoding/json"
	"strconv"
)

// Kind is what became of a callback that reached the service.
// internal/httpapi maps each Kind to its HTTP status and body in one
// table; the refusals that only HTTP produces (bad body, size, nonce,
// route) are its own.
type Kind int

// The outcomes the service produces.
const (
	KindInternal   Kind = iota // 500, no detail
	KindCreated                // 200 a write's first answer
	KindDuplicate              // 200 a write's stored answer, replayed
	KindFound                  // 200 a read's answer
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

// ToolAnswer reports whether k is a tool's own answer (created,
// deduplicated, found): its body is the tool's, Outcome.Body. The other
// kinds' bodies are the doors' (retryable, rejection, short error).
func (k Kind) ToolAnswer() bool {
	return k == KindCreated || k == KindDuplicate || k == KindFound
}

// Outcome is what happened to one callback: the answer, and how far the
// call got (function, tenant, key), which the caller logs.
type Outcome struct {
	Kind    Kind
	Code    string // rejection code
	Message string // for the model: what happened and what to do next

	// Body is a tool's own answer (Kind.ToolAnswer), the JSON the doors
	// send as it is: the tool builds it, with its "status"; nothing else
	// reads its members.
	Body json.RawMessage

	// What the call resolved to, as far as it got; never sent.
	Function string // the function named by the call
	TenantID string // once the user is known
	Key      string // once the operation key is derived
	Err      error  // the cause of a busy or internal outcome
}

// Answered is a tool's own answer of kind k with body v, encoded as the
// doors send it; a body that does not encode is an internal outcome.
func Answered(k Kind, v any) Outcome {
	b, err := json.Marshal(v)
	if err != nil {
		return Outcome{Kind: KindInternal, Err: err}
	}
	return Outcome{Kind: k, Body: b}
}

// Reject builds a correctable-input rejection.
func Reject(code, message string) Outcome {
	return Outcome{Kind: KindRejected, Code: code, Message: message}
}
