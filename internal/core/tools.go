package core

import (
	"encoding/json"
	"fmt"
)

// Hints are the behaviour annotations an MCP client reads from a tool
// (docs/contract.md, The MCP door: Tools). They follow from Writes: a
// function that writes goes through the operation key, so it is
// idempotent given a request_id and only ever adds (never destructive); a
// function that does not write is read-only.
type Hints struct {
	ReadOnly    bool
	Destructive bool
	Idempotent  bool
}

// Hints returns the function's annotations.
func (f *Function) Hints() Hints {
	if f.Writes {
		return Hints{ReadOnly: false, Destructive: false, Idempotent: true}
	}
	return Hints{ReadOnly: true}
}

// Statuses are the values of "status" in the function's answers (the
// 200 bodies of docs/contract.md, Responses), in the order of the output
// schema's branches. A deduplicated answer is the stored "created" result
// plus deduplicated: true.
func (f *Function) Statuses() []string {
	switch f.Name {
	case CreateTicket:
		return []string{KindCreated.String(), KindInProgress.String(), KindBusy.String(), KindRejected.String()}
	case GetTicket:
		return []string{KindFound.String(), KindBusy.String(), KindRejected.String()}
	}
	return []string{KindBusy.String(), KindRejected.String()}
}

// OutputSchema is the JSON Schema of the function's answers: one branch
// per status of Statuses, each the shape the callback's 200 body has for
// it. MCP clients validate a tool's structuredContent against it, so it
// states exactly the members the bodies carry and nothing the bodies lack.
func (f *Function) OutputSchema() json.RawMessage {
	b, err := f.outputSchema()
	if err != nil {
		panic("core: output schema of " + f.Name + ": " + err.Error())
	}
	return b
}

func (f *Function) outputSchema() (json.RawMessage, error) {
	str := map[string]any{"type": "string"}
	status := func(s string) map[string]any { return map[string]any{"const": s} }
	obj := func(props map[string]any, required ...string) map[string]any {
		return map[string]any{"type": "object", "properties": props, "required": required}
	}
	var branches []any
	for _, s := range f.Statuses() {
		switch s {
		case KindCreated.String():
			branches = append(branches, obj(map[string]any{
				"status": status(s), "ticket_id": str, "deduplicated": map[string]any{"type": "boolean"},
			}, "status", "ticket_id", "deduplicated"))
		case KindInProgress.String(), KindBusy.String():
			branches = append(branches, obj(map[string]any{
				"status": status(s), "retryable": map[string]any{"const": true}, "message": str,
			}, "status", "retryable", "message"))
		case KindRejected.String():
			branches = append(branches, obj(map[string]any{
				"status": status(s),
				"error":  obj(map[string]any{"code": str, "message": str}, "code", "message"),
			}, "status", "error"))
		case KindFound.String():
			delivery := obj(map[string]any{"state": str, "external_id": str, "external_url": str}, "state")
			ticket := obj(map[string]any{
				"ticket_id": str, "title": str, "description": str, "priority": str, "created_at": str,
				"delivery": delivery,
			}, "ticket_id", "title", "description", "priority", "created_at")
			branches = append(branches, obj(map[string]any{"status": status(s), "ticket": ticket}, "status", "ticket"))
		default:
			return nil, fmt.Errorf("no schema for status %q", s)
		}
	}
	// No "$schema": MCP takes JSON Schema 2020-12 as the default, and the
	// schema uses nothing that differs between drafts, so validators of
	// any draft (the TypeScript SDK's among them) read it alike.
	return json.Marshal(map[string]any{"type": "object", "oneOf": branches})
}
