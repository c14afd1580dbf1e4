package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
)

// Hints are the behaviour annotations an MCP client reads from a tool
// (docs/contract.md, The MCP door: Tools). They follow from Writes, that is from the tool's Write: a
// function that writes goes through the operation key, so it is
// idempotent given a request_id, and destructive only when it cannot be
// undone (Write.Final: a close); a function that does not write is
// read-only.
type Hints struct {
	ReadOnly    bool
	Destructive bool
	Idempotent  bool
}

// Hints returns the function's annotations: a write that cannot be
// undone (Write.Final) is destructive.
func (f *Function) Hints() Hints {
	if f.Writes() {
		return Hints{ReadOnly: false, Destructive: f.Write.Final, Idempotent: true}
	}
	return Hints{ReadOnly: true}
}

// Statuses are the values of "status" in the function's answers (the
// 200 bodies of docs/contract.md, Responses), in the order of the output
// schema's branches: its own answer, in progress for a tool that writes,
// busy and rejected. A deduplicated answer is the stored "created" result
// plus deduplicated: true.
func (f *Function) Statuses() []string {
	s := []string{f.Answer.status()}
	if f.Writes() {
		s = append(s, KindInProgress.String())
	}
	return append(s, KindBusy.String(), KindRejected.String())
}

// OutputSchema is the JSON Schema of the function's answers: one branch
// per status of Statuses, each the shape the callback's 200 body has for
// it. MCP clients validate a tool's structuredContent against it, so it
// states exactly the members the bodies carry and nothing the bodies lack.
// The bytes are the caller's own.
func (f *Function) OutputSchema() json.RawMessage { return bytes.Clone(f.output) }

// status is the answer's "status": Status, or Kind's name.
func (a Answer) status() string {
	if a.Status != "" {
		return a.Status
	}
	return a.Kind.String()
}

// Codes are the rejection codes the tools answer: the service's, then
// each tool's own, each once. They are the metrics' closed set of codes.
func (t *Tools) Codes() []string {
	codes := []string{CodeUnknownFunction, CodeMissingExternalUserID, CodeMissingRequestID,
		CodeInvalidRequestID, CodeInvalidArguments, CodeArgumentsMismatch, CodeRequestIDConflict}
	for _, f := range t.fns {
		for _, c := range f.codes() {
			if !slices.Contains(codes, c) {
				codes = append(codes, c)
			}
		}
	}
	return codes
}

// Names are the tools' names, in order.
func (t *Tools) Names() []string {
	names := make([]string, len(t.fns))
	for i := range t.fns {
		names[i] = t.fns[i].Name
	}
	return names
}

// codes are f's own rejection codes.
func (f *Function) codes() []string {
	if f.Write != nil {
		return f.Write.Codes
	}
	return f.Codes
}

// schemaString is the JSON Schema of a string member of an answer.
var schemaString = map[string]any{"type": "string"}

// schemaObject is the JSON Schema of an object with these members, the
// required ones named.
func schemaObject(members map[string]any, required ...string) map[string]any {
	return map[string]any{"type": "object", "properties": members, "required": required}
}

func (f *Function) outputSchema() (json.RawMessage, error) {
	status := func(k Kind) map[string]any { return map[string]any{"const": k.String()} }
	if f.Answer.Kind == KindInternal || len(f.Answer.Members) == 0 {
		return nil, errors.New("the tool defines no answer")
	}
	own := maps.Clone(f.Answer.Members)
	own["status"] = map[string]any{"const": f.Answer.status()}
	branches := []any{schemaObject(own, append([]string{"status"}, f.Answer.Required...)...)}
	retry := func(k Kind) map[string]any {
		return schemaObject(map[string]any{
			"status": status(k), "retryable": map[string]any{"const": true}, "message": schemaString,
		}, "status", "retryable", "message")
	}
	if f.Writes() {
		branches = append(branches, retry(KindInProgress))
	}
	branches = append(branches, retry(KindBusy), schemaObject(map[string]any{
		"status": status(KindRejected),
		"error":  schemaObject(map[string]any{"code": schemaString, "message": schemaString}, "code", "message"),
	}, "status", "error"))
	// No "$schema": MCP takes JSON Schema 2020-12 as the default, and the
	// schema uses nothing that differs between drafts, so validators of
	// any draft (the TypeScript SDK's among them) read it alike.
	return json.Marshal(map[string]any{"type": "object", "oneOf": branches})
}
