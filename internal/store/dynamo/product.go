package dynamo

import "time"

// Product is the store every program of the product opens on table (the
// callback and delivery functions, the local server on DynamoDB, the
// operator's command): the one place its options are chosen. A zero
// callTimeout is DefaultCallTimeout.
func Product(client Client, table string, callTimeout time.Duration) *Store {
	return New(client, table, Options{CallTimeout: callTimeout})
}
