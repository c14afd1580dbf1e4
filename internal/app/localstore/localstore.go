// Package localstore opens the store of a local configuration file
// (SQLite, or DynamoDB with the AWS CLI's credential chain): the one
// place both local programs (the local server and the operator's
// command) open it.
package localstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/redact"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
)

// Open opens the local configuration's store (SQLite or DynamoDB).
// The closer closes it.
func Open(ctx context.Context, cfg config.StoreSettings, logger *slog.Logger) (core.Store, io.Closer, error) {
	s, closer, _, err := OpenNamed(ctx, cfg, logger)
	return s, closer, err
}

// OpenNamed is Open that also names the store it opened, for the
// operator: the SQLite file, or the DynamoDB table with the region its
// AWS configuration resolved (and the endpoint when not AWS's own).
func OpenNamed(ctx context.Context, cfg config.StoreSettings, logger *slog.Logger) (core.Store, io.Closer, string, error) {
	switch cfg.Kind {
	case config.StoreSQLite:
		s, closer, err := openSQLite(ctx, cfg.Path, logger)
		return s, closer, "SQLite file " + cfg.Path, err
	case config.StoreDynamoDB:
		awsCfg, err := LocalAWSConfig(ctx, cfg.Region, cfg.Endpoint, logger)
		if err != nil {
			return nil, nil, "", err
		}
		client := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
			if cfg.Endpoint != "" {
				o.BaseEndpoint = aws.String(cfg.Endpoint)
			}
		})
		name := fmt.Sprintf("DynamoDB table %s in region %s", cfg.Table, awsCfg.Region)
		if cfg.Endpoint != "" {
			name += " at " + redact.RawURL(cfg.Endpoint)
		}
		return dynamo.Product(client, cfg.Table, 0), nopCloser{}, name, nil
	}
	return nil, nil, "", fmt.Errorf("config: store.kind: %q is neither sqlite nor dynamodb", cfg.Kind)
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

// LocalRegion is the region LocalAWSConfig signs with for an endpoint
// such as DynamoDB Local when the chain names none.
const LocalRegion = "us-east-1"

// DummyAccessKeyID is the access key of the dummy credentials of
// LocalAWSConfig.
const DummyAccessKeyID = "local"

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

type closerFunc func() error

func (f closerFunc) Close() error { return f() }
