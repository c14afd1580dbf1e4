// Package app holds the composition root of each local program, each in
// its own package, so that a program links only what it runs:
//
//	cmd/server          → localserver  (local server, make run: doors, store, worker)
//	cmd/deliveries      → operator     (operator's command on a local file's store)
//
// Each Lambda's composition root is in its main package, in handler.go
// beside main.go: functions/callback (AIVAX and MCP doors on DynamoDB)
// and functions/delivery (stream and sweep to the helpdesk).
//
// What two programs share has its own package: doors (the service and
// both doors), destination (the helpdesk client of each kind), localstore
// (a local file's store). The tests of this package check with go list
// which packages each Lambda links.
package app
