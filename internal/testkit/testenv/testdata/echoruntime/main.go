// Command echoruntime is a minimal custom Lambda runtime with no
// dependencies: it answers every event with {"echo": <event>}. It is used to
// check that aws-lambda-rie works with the flags testenv documents.
package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {
	api := "http://" + os.Getenv("AWS_LAMBDA_RUNTIME_API") + "/2018-06-01/runtime/invocation/"
	for {
		resp, err := http.Get(api + "next")
		if err != nil {
			fmt.Fprintln(os.Stderr, "next:", err)
			os.Exit(1)
		}
		event, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		id := resp.Header.Get("Lambda-Runtime-Aws-Request-Id")
		fmt.Println("echoruntime: handling", id)
		out := append(append([]byte(`{"echo":`), event...), '}')
		r, err := http.Post(api+id+"/response", "application/json", bytes.NewReader(out))
		if err != nil {
			fmt.Fprintln(os.Stderr, "response:", err)
			os.Exit(1)
		}
		_ = r.Body.Close()
	}
}
