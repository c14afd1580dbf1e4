// Command seedlocal prepares a DynamoDB table for local runs (DynamoDB Local
// or a dev account): it creates the table (docs/contract.md, Stored items)
// if it is missing and writes a USER#<id> item for every user of a local
// configuration file.
//
//	go run ./cmd/seedlocal -endpoint http://127.0.0.1:8000 -table tickets-local -config config.example.json
//
// This file only wires: flags and configuration, then internal/app/seed.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/aivax-examples/idempotent-callback/internal/app/seed"
	"github.com/aivax-examples/idempotent-callback/internal/config"
)

func main() {
	var o seed.Options
	flag.StringVar(&o.Endpoint, "endpoint", "", "DynamoDB endpoint, e.g. http://127.0.0.1:8000 for DynamoDB Local (empty: AWS)")
	flag.StringVar(&o.Table, "table", "tickets-local", "table name")
	flag.StringVar(&o.Region, "region", "", "AWS region (empty: the SDK's chain: AWS_REGION, AWS_DEFAULT_REGION, the profile)")
	path := flag.String("config", "config.example.json", "local configuration file whose users to write")
	flag.Parse()
	cfg, err := config.LoadFile(*path)
	if err == nil && flag.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments: %v", flag.Args())
	}
	if err == nil {
		err = seed.Run(cfg, o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "seedlocal:", err)
		os.Exit(1)
	}
}
