// Package localstore opens the store of a local configuration file
// (SQLite, or DynamoDB with the AWS CLI's credential chain) and owns its
// settings' checks and defaults: the one place the local programs (the
// local server, the operator's command, seedlocal) check and open it.
package localstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/tracing/otelsetup"
	"github.com/aivax-examples/idempotent-callback/internal/urls"
)

// The store kinds of the local file's store.kind, and the SQLite file
// when store.path is absent.
const (
	KindSQLite        = "sqlite"
	KindDynamoDB      = "dynamodb"
	DefaultSQLitePath = "tickets.sqlite"
)

// Settings are a store block checked by CheckSettings: kind sqlite on a
// resolved file path, or kind dynamodb with a table. Open and OpenNamed
// take them as they are; only CheckSettings makes them.
type Settings struct{ s config.StoreSettings }

// Kind is the store's kind: KindSQLite or KindDynamoDB.
func (s Settings) Kind() string { return s.s.Kind }

// Block is the store block as checked, its defaults set.
func (s Settings) Block() config.StoreSettings { return s.s }

// CheckSettings checks the file's store block s and returns it with its
// defaults set: kind sqlite (the default) on a plain file path
// (DefaultSQLitePath when absent; see FilePath, with dir the file's
// folder), or kind dynamodb with a table. Each local program calls it
// once, right after reading the file, and carries what it returns.
func CheckSettings(s config.StoreSettings, dir string) (Settings, error) {
	switch s.Kind {
	case "", KindSQLite:
		s.Kind = KindSQLite
		p, err := FilePath("store.path", cmp.Or(s.Path, DefaultSQLitePath), dir)
		if err != nil {
			return Settings{}, err
		}
		s.Path = p
	case KindDynamoDB:
		if s.Table == "" {
			return Settings{}, errors.New("config: store.table is required when store.kind is dynamodb")
		}
	default:
		return Settings{}, fmt.Errorf("config: store.kind: %q is neither sqlite nor dynamodb", s.Kind)
	}
	return Settings{s}, nil
}

// FilePath checks a path the local file names (field is its name, for the
// error): a plain file path, with a leading "~/" taken as the home folder
// (the shell does not expand it inside JSON), and a relative one taken
// from dir, the file's folder ("" leaves it relative). URIs and SQLite's
// ":memory:" are refused: the store keeps tickets in a file.
func FilePath(field, p, dir string) (string, error) {
	switch {
	case p == ":memory:":
		return "", fmt.Errorf("config: %s: %q is not supported: the store keeps tickets in a file; name one, e.g. %q", field, p, DefaultSQLitePath)
	case strings.HasPrefix(p, "file:"):
		return "", fmt.Errorf("config: %s: %q is a URI; give a file path, e.g. %q", field, p, DefaultSQLitePath)
	case p == "~" || strings.HasPrefix(p, "~/"):
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("config: %s: %q: no home folder to expand ~ to: %w", field, p, err)
		}
		p = filepath.Join(home, p[1:])
	case strings.HasPrefix(p, "~"):
		return "", fmt.Errorf("config: %s: %q: only ~/ (your own home folder) is expanded; give the full path", field, p)
	}
	if dir == "" || filepath.IsAbs(p) {
		return p, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("config: %s: %w", field, err)
	}
	return filepath.Join(abs, p), nil
}

// Open opens the local configuration's store (SQLite or DynamoDB) of
// checked settings. The closer closes it. On DynamoDB, onReadAheadError
// (nil: none) is told of each claim read-ahead that failed
// (dynamo.Options.OnReadAheadError).
func Open(ctx context.Context, cfg Settings, logger *slog.Logger, onReadAheadError func(context.Context, error), tp *otelsetup.Provider) (core.Store, io.Closer, error) {
	s, closer, _, err := openNamed(ctx, cfg, logger, onReadAheadError, tp)
	return s, closer, err
}

// OpenNamed is Open that also names the store it opened, for the
// operator: the SQLite file, or the DynamoDB table with the region its
// AWS configuration resolved (and the endpoint when not AWS's own).
func OpenNamed(ctx context.Context, cfg Settings, logger *slog.Logger) (core.Store, io.Closer, string, error) {
	return openNamed(ctx, cfg, logger, nil, nil) // the operator makes no claims and records no spans
}

func openNamed(ctx context.Context, checked Settings, logger *slog.Logger, onReadAheadError func(context.Context, error), tp *otelsetup.Provider) (core.Store, io.Closer, string, error) {
	cfg := checked.s
	if cfg.Kind == KindSQLite {
		s, closer, err := openSQLite(ctx, cfg.Path, logger)
		return s, closer, "SQLite file " + cfg.Path, err
	}
	awsCfg, err := LocalAWSConfig(ctx, cfg.Region, cfg.Endpoint, logger)
	if err != nil {
		return nil, nil, "", err
	}
	tp.AWS(&awsCfg, dynamo.IsReadAhead) // a span per DynamoDB request while tp exports
	client := DynamoDBClient(awsCfg, cfg.Endpoint)
	name := fmt.Sprintf("DynamoDB table %s in region %s", cfg.Table, awsCfg.Region)
	if cfg.Endpoint != "" {
		name += " at " + urls.RedactedRaw(cfg.Endpoint)
	}
	s := dynamo.Product(client, cfg.Table, 0, onReadAheadError)
	return s, storeWaiter{s}, name, nil
}

// LocalAWSConfig is the AWS configuration of local runs: the SDK's default
// chain, as the AWS CLI uses it, for credentials and for the region
// (AWS_REGION, AWS_DEFAULT_REGION, the profile); region, when not empty
// (the file's store.region), wins. DynamoDB Local keeps one database per
// access key unless it runs with -sharedDb, so credentials of our own
// choosing would hide the tables a user made with the CLI. With an
// endpoint (DynamoDB Local) and no credentials anywhere in the chain,
// fixed dummy ones are used, since DynamoDB Local accepts any, and with no
// region anywhere LocalRegion (DynamoDB Local ignores it but the SDK signs
// with one); the chain's EC2 metadata lookup is skipped then, which off EC2
// only costs time. Without an endpoint, no region is an error: a guess
// could act on a table of the same name in another region.
func LocalAWSConfig(ctx context.Context, region, endpoint string, logger *slog.Logger) (aws.Config, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if region != "" {
		opts = append(opts, awsconfig.WithRegion(region))
	}
	if endpoint != "" {
		opts = append(opts, awsconfig.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("aws config: %w", err)
	}
	if endpoint == "" {
		if awsCfg.Region == "" {
			return aws.Config{}, errors.New("config: store.region: no AWS region: set AWS_REGION, a region in your AWS profile, or store.region")
		}
		return awsCfg, nil
	}
	if awsCfg.Region == "" {
		awsCfg.Region = LocalRegion
	}
	if _, err := awsCfg.Credentials.Retrieve(ctx); err != nil {
		logger.Info("no AWS credentials found; using dummy ones for the DynamoDB endpoint",
			slog.String("endpoint", endpoint))
		awsCfg.Credentials = credentials.NewStaticCredentialsProvider(DummyAccessKeyID, "local", "")
	}
	return awsCfg, nil
}

// DynamoDBClient is the DynamoDB client of local runs on awsCfg (see
// LocalAWSConfig), sending to endpoint when not empty. DynamoDB Local
// sends a CRC32 of 0 on error responses, so with an endpoint the response
// checksum is not validated: the SDK would otherwise write a warning to
// stderr for every expected error answer (a condition that fails, a
// cancelled transaction, a table not found).
func DynamoDBClient(awsCfg aws.Config, endpoint string) *dynamodb.Client {
	return dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			o.DisableValidateResponseChecksum = true
		}
	})
}

// LocalRegion is the region LocalAWSConfig signs with for an endpoint
// such as DynamoDB Local when the chain names none.
const LocalRegion = "us-east-1"

// DummyAccessKeyID is the access key of the dummy credentials of
// LocalAWSConfig.
const DummyAccessKeyID = "local"

// storeWaiter closes a DynamoDB store: it waits for the requests its
// claims left behind (the read-aheads a claim answered without), so that
// a stopped server leaves none in flight; each is bounded by the store's
// call timeout.
type storeWaiter struct{ s *dynamo.Store }

func (w storeWaiter) Close() error { w.s.Wait(); return nil }
