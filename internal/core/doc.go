// Package core is the product's domain: the records (users, operations,
// tickets), the interfaces the stores implement, the outcomes a callback can
// have, and the Service that turns a parsed tool call into an outcome
// (docs/contract.md: Order of checks steps 4 to 8, Operation key, Stored
// items, Functions).
//
// Each tool is defined once, in a file of its own (tool_<name>.go, a
// Function registered from an init function): its arguments, its answer,
// and the read or the write it performs. The catalogue, the validation,
// the MCP tools and the dispatch of Service.Answer all come from those
// definitions (Tools).
//
// Everything a store does not need to know lives here and is written once:
// the key policy, what a repeat returns, how a pending operation is
// answered, when an operation counts as expired. Each store adapter
// (internal/store/...) only performs the transaction and maps its own
// errors to ErrBusy or ErrNotFound.
package core
