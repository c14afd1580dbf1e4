// Command deliveries is the operator's command on a local configuration's
// store (go run ./cmd/deliveries -config config.json list): list, show,
// retry and resolve deliveries, and check the destination's lookups. This
// file only wires: configuration and its store block's checks, then
// internal/app/operator.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/aivax-examples/idempotent-callback/internal/app/localstore"
	"github.com/aivax-examples/idempotent-callback/internal/app/operator"
	"github.com/aivax-examples/idempotent-callback/internal/config"
)

func main() {
	path := flag.String("config", "config.json", "the local configuration file (docs/contract.md, Configuration: Local server)")
	flag.Usage = func() { fmt.Fprint(os.Stderr, operator.DeliveriesUsage) }
	flag.Parse()
	cfg, err := config.LoadFile(*path)
	var st localstore.Settings
	if err == nil {
		st, err = localstore.CheckSettings(cfg.Store, cfg.Dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(operator.Deliveries(context.Background(), cfg, st, flag.Args(), os.Stdin, os.Stdout, os.Stderr))
}
