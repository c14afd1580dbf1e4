package dynamo

import (
	"context"
	"time"
)

// Product is the store every program of the product opens on table (the
// callback and delivery functions, the local server on DynamoDB, the
// operator's command): the one place its options are chosen. A zero
// callTimeout is DefaultCallTimeout. onReadAheadError is
// Options.OnReadAheadError: the programs that make claims (the callback
// function, the local server) give metrics.ReadAheadReporter's hook; nil
// for those that make none.
func Product(client Client, table string, callTimeout time.Duration, onReadAheadError func(context.Context, error)) *Store {
	return New(client, table, Options{CallTimeout: callTimeout, OnReadAheadError: onReadAheadError})
}
