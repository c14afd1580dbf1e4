// Package app holds one composition root per program, each in its own
// package, so that a program links only what it runs:
//
//	functions/callback  → callbackfn   (callback Lambda: AIVAX and MCP doors on DynamoDB)
//	functions/delivery  → deliveryfn   (delivery Lambda: stream and sweep to the helpdesk)
//	cmd/server          → localserver  (local server, make run: doors, store, worker)
//	cmd/deliveries      → operator     (operator's command on a local file's store)
//
// What two programs share has its own package: doors (the service and
// both doors), destination (the helpdesk client of each kind), localstore
// (a local file's store) and lambdalog (both Lambdas' logger). The tests
// of this package check with go list which packages each Lambda links.
package app
