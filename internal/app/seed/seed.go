// Package seed is the composition root of cmd/seedlocal: it prepares a
// DynamoDB table for local runs (DynamoDB Local or a dev account).
//
// It signs with the usual AWS credential chain, as the local server does;
// with an endpoint set and no credentials found, with dummy ones (DynamoDB
// Local accepts any, and `make dynamodb-local` runs it with -sharedDb, so
// every access key sees the same tables).
package seed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/internal/app/localstore"
	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
)

// Options are the seedlocal command's flags: where the table is.
type Options struct {
	Endpoint string // DynamoDB endpoint, e.g. DynamoDB Local; "" is AWS
	Table    string
	Region   string // "": the SDK's chain
}

// Run creates o.Table unless it exists (adding the due index to an
// existing one that lacks it) and writes a user item for every user of
// cfg, saying what it did on stdout. The file is checked as the other
// local programs check it: its store block first, then its users.
func Run(cfg config.Local, o Options) error {
	if _, err := localstore.CheckSettings(cfg.Store, cfg.Dir); err != nil {
		return err
	}
	if err := core.CheckUserIDs(cfg.Users); err != nil {
		return fmt.Errorf("config: users: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	awsCfg, err := localstore.LocalAWSConfig(ctx, o.Region, o.Endpoint, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		return err
	}
	client := localstore.DynamoDBClient(awsCfg, o.Endpoint)

	created, err := ensureTable(ctx, client, o.Table)
	if err != nil {
		return err
	}
	if created {
		fmt.Printf("created table %s\n", o.Table)
	} else {
		fmt.Printf("table %s already exists\n", o.Table)
	}

	store := dynamo.Product(client, o.Table, 10*time.Second, nil)
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

// ensureTable creates the table of dynamo.CreateTable (pk S, on demand,
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
	_, err = c.CreateTable(ctx, dynamo.CreateTable(table))
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) { // in use: created concurrently
		return false, fmt.Errorf("create table %s: %w", table, err)
	}
	if err := dynamodb.NewTableExistsWaiter(c).Wait(ctx, &dynamodb.DescribeTableInput{TableName: &table}, time.Minute); err != nil {
		return false, fmt.Errorf("wait for table %s: %w", table, err)
	}
	_, err = c.UpdateTimeToLive(ctx, dynamo.EnableTTL(table))
	if err != nil {
		// Some DynamoDB Local versions reject or ignore TTL; the claim's
		// condition treats expired operations as absent anyway.
		fmt.Fprintf(os.Stderr, "seedlocal: TTL on expires_at not enabled (ignored): %v\n", err)
	}
	return true, nil
}
