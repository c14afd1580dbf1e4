// Command seedlocal prepares a DynamoDB table for local runs (DynamoDB Local
// or a dev account): it creates the table (docs/contract.md, Stored items)
// if it is missing and writes a USER#<id> item for every user of a local
// configuration file.
//
//	go run ./cmd/seedlocal -endpoint http://127.0.0.1:8000 -table tickets-local -config config.example.json
//
// It signs with the usual AWS credential chain, as the local server does;
// with -endpoint set and no credentials found, with dummy ones (DynamoDB
// Local accepts any, and `make dynamodb-local` runs it with -sharedDb, so
// every access key sees the same tables).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/internal/app/localstore"
	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo/tableschema"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "seedlocal:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("seedlocal", flag.ContinueOnError)
	endpoint := fs.String("endpoint", "", "DynamoDB endpoint, e.g. http://127.0.0.1:8000 for DynamoDB Local (empty: AWS)")
	table := fs.String("table", "tickets-local", "table name")
	region := fs.String("region", "", "AWS region (empty: the SDK's chain: AWS_REGION, AWS_DEFAULT_REGION, the profile)")
	path := fs.String("config", "config.example.json", "local configuration file whose users to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	cfg, err := config.LoadFile(*path)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	awsCfg, err := localstore.LocalAWSConfig(ctx, *region, *endpoint, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		return err
	}
	client := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		if *endpoint != "" {
			o.BaseEndpoint = aws.String(*endpoint)
			// DynamoDB Local sends a CRC32 of 0 on error responses, which
			// makes the SDK log a warning for every expected "not found".
			o.DisableValidateResponseChecksum = true
		}
	})

	created, err := ensureTable(ctx, client, *table)
	if err != nil {
		return err
	}
	if created {
		fmt.Printf("created table %s\n", *table)
	} else {
		fmt.Printf("table %s already exists\n", *table)
	}

	store := dynamo.New(client, *table, dynamo.Options{CallTimeout: 10 * time.Second})
	ids := make([]string, 0, len(cfg.Users))
	for id := range cfg.Users {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		u := cfg.Users[id]
		if err := store.PutUser(ctx, core.User{ExternalID: id, TenantID: u.TenantID, UserID: u.UserID, Disabled: u.Disabled}); err != nil {
			return fmt.Errorf("user %s: %w", id, err)
		}
		state := "enabled"
		if u.Disabled {
			state = "disabled"
		}
		fmt.Printf("user %s -> tenant %s, user %s (%s)\n", id, u.TenantID, u.UserID, state)
	}
	return nil
}

// ensureTable creates the table of package tableschema (pk S, on demand,
// TTL on expires_at) unless it exists, and waits until it is active.
func ensureTable(ctx context.Context, c *dynamodb.Client, table string) (bool, error) {
	_, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
	var missing *types.ResourceNotFoundException
	switch {
	case err == nil:
		// An existing table that lacks the due index gains it.
		if added, err := dynamo.EnsureDeliveryIndex(ctx, c, table); err != nil {
			return false, err
		} else if added {
			fmt.Printf("added index %s to table %s\n", dynamo.DeliveryDueIndex, table)
		}
		return false, nil
	case !errors.As(err, &missing):
		return false, fmt.Errorf("describe table %s: %w", table, err)
	}
	_, err = c.CreateTable(ctx, tableschema.CreateTable(table))
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) { // in use: created concurrently
		return false, fmt.Errorf("create table %s: %w", table, err)
	}
	if err := dynamodb.NewTableExistsWaiter(c).Wait(ctx, &dynamodb.DescribeTableInput{TableName: &table}, time.Minute); err != nil {
		return false, fmt.Errorf("wait for table %s: %w", table, err)
	}
	_, err = c.UpdateTimeToLive(ctx, tableschema.EnableTTL(table))
	if err != nil {
		// Some DynamoDB Local versions reject or ignore TTL; the claim's
		// condition treats expired operations as absent anyway.
		fmt.Fprintf(os.Stderr, "seedlocal: TTL on expires_at not enabled (ignored): %v\n", err)
	}
	return true, nil
}
