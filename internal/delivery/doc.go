// Package delivery delivers each ticket to the team's helpdesk exactly once,
// through a transactional outbox: the ticket item carries its delivery
// state, written as pending in the transaction that creates the ticket, and
// a worker claims, sends and records it afterwards.
//
// The package is the domain of delivery: the states, the Destination a
// helpdesk adapter implements, and the engine that drives one ticket from
// pending to delivered, failed or unknown. It imports no AWS SDK, SQL or
// HTTP server; the stores and the helpdesk adapters live in their own
// packages.
package delivery
