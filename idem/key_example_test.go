package idem_test

import (
	"fmt"

	"github.com/aivax-examples/idempotent-callback/idem"
)

// The operation key of a create_ticket call: the arguments in their RFC
// 8785 form (member order and white space do not matter), then the hex
// SHA-256 of the canonical array [tenant, request_id, function, canonical].
// The tenant comes from the user's record, never from the call.
func ExampleKey() {
	for _, args := range []string{
		`{"title": "Cannot sign in", "priority": "high"}`,
		`{ "priority":"high","title":"Cannot sign in" }`,
	} {
		canonical, err := idem.Canonical([]byte(args))
		if err != nil {
			fmt.Println(err)
			return
		}
		key, _ := idem.Key(idem.PolicyArguments, "tenant-a", "request-example", "create_ticket", canonical)
		fmt.Println(canonical)
		fmt.Println(key)
	}
	_, err := idem.Canonical([]byte(`{"title":"a","title":"b"}`))
	fmt.Println(err)
	// Output:
	// {"priority":"high","title":"Cannot sign in"}
	// baddea47c9996fcbf63f5b17b8dffebdb43147e2b8e3050e4833f8fd842722a4
	// {"priority":"high","title":"Cannot sign in"}
	// baddea47c9996fcbf63f5b17b8dffebdb43147e2b8e3050e4833f8fd842722a4
	// invalid arguments: a member name appears twice in the same object
}
