package idem_test

import (
	"errors"
	"fmt"

	"github.com/aivax-examples/idempotent-callback/idem"
)

// The operation key of a create_order call: the arguments in their RFC
// 8785 form (member order and white space do not matter), then the hex
// SHA-256 of the canonical array [tenant, request_id, function, canonical].
// The tenant comes from the caller's authenticated identity, never from
// the call's arguments.
func ExampleKey() {
	for _, args := range []string{
		`{"sku": "A-1", "qty": 2}`,
		`{ "qty":2,"sku":"A-1" }`,
	} {
		canonical, err := idem.Canonical([]byte(args))
		if err != nil {
			fmt.Println(err)
			return
		}
		key, _ := idem.Key(idem.PolicyArguments, "tenant-a", "request-example", "create_order", canonical)
		fmt.Println(canonical)
		fmt.Println(key)
	}
	// Arguments that cannot be keyed: the reason is for the caller, who
	// can correct them.
	_, err := idem.Canonical([]byte(`{"sku":"A-1","sku":"B-2"}`))
	var bad *idem.InvalidError
	if errors.As(err, &bad) {
		fmt.Println(bad.Reason)
	}
	// Output:
	// {"qty":2,"sku":"A-1"}
	// 46af8cdb1783fc1c95a351f6d941f951e64a9355adebdc2bec08754be4c9317e
	// {"qty":2,"sku":"A-1"}
	// 46af8cdb1783fc1c95a351f6d941f951e64a9355adebdc2bec08754be4c9317e
	// a member name appears twice in the same object
}
