package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
)

// DynamoDB Local, started at most once per test binary.
var (
	ddbOnce     sync.Once
	ddbEndpoint string
	ddbErr      error
	ddbMissing  bool // ddbErr says the jar is not installed
)

// EnvDynamoDBEndpoint names the variable that, when set, gives the endpoint
// of a DynamoDB (Local) that [DynamoDB] returns instead of starting one.
const EnvDynamoDBEndpoint = "DYNAMODB_ENDPOINT"

// Region is the region of the clients made here.
const Region = "us-east-1"

// ddbStartTimeout bounds how long DynamoDB Local may take to answer. Under
// -race on a 2-core machine with other test binaries starting their own JVMs,
// start-up can take several seconds.
const ddbStartTimeout = 90 * time.Second

// DynamoDB returns the endpoint URL (http://127.0.0.1:PORT) of a running
// DynamoDB Local: $DYNAMODB_ENDPOINT if set, else one started once per test
// binary from <repo>/.cache/dynamodb-local.
func DynamoDB(t testing.TB) string {
	t.Helper()
	if ep := os.Getenv(EnvDynamoDBEndpoint); ep != "" {
		return ep
	}
	ddbOnce.Do(func() { ddbEndpoint, ddbErr = startDynamoDB() })
	if ddbErr != nil {
		if ddbMissing {
			missing(t, ddbErr.Error())
		}
		t.Fatal(ddbErr)
	}
	return ddbEndpoint
}

// DynamoDBEndpoint is DynamoDB for code without a testing.TB, such as a
// TestMain whose runnable examples need a table: the same endpoint, or
// the reason there is none.
func DynamoDBEndpoint() (string, error) {
	if ep := os.Getenv(EnvDynamoDBEndpoint); ep != "" {
		return ep, nil
	}
	ddbOnce.Do(func() { ddbEndpoint, ddbErr = startDynamoDB() })
	return ddbEndpoint, ddbErr
}

func startDynamoDB() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, ".cache", "dynamodb-local")
	jar := filepath.Join(dir, "DynamoDBLocal.jar")
	if _, err := os.Stat(jar); err != nil {
		ddbMissing = true
		return "", fmt.Errorf("DynamoDB Local not found at %s", jar)
	}
	java, err := exec.LookPath("java")
	if err != nil {
		ddbMissing = true
		return "", errors.New("java not found on PATH, needed for DynamoDB Local")
	}
	// A port picked by freePort can be taken before java binds it; retry.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return "", err
		}
		ep, err := startDynamoDBOn(java, dir, port)
		if err == nil {
			return ep, nil
		}
		lastErr = err
	}
	return "", lastErr
}

func startDynamoDBOn(java, dir string, port int) (string, error) {
	out := &Buffer{Limit: 64 << 10} // start-up output is what matters
	cmd := exec.Command(java,       //nolint:gosec // fixed program, arguments built here
		"-Xmx512m",
		"-Djava.library.path=./DynamoDBLocal_lib",
		"-jar", "DynamoDBLocal.jar",
		"-inMemory", "-sharedDb", "-disableTelemetry",
		"-port", fmt.Sprint(port),
	)
	cmd.Dir = dir
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("testenv: start DynamoDB Local: %w", err)
	}
	var waitErr error
	exited := make(chan struct{}) // closed when the process has exited
	go func() { waitErr = cmd.Wait(); close(exited) }()
	// stop kills the process; Wait is already running in the goroutine.
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}

	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(ddbStartTimeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-exited:
			return "", fmt.Errorf("testenv: DynamoDB Local exited during start-up (%w); output:\n%s", waitErr, out.String())
		default:
		}
		if answers(client, endpoint) {
			break
		}
		if time.Now().After(deadline) {
			stop()
			return "", fmt.Errorf("testenv: DynamoDB Local did not answer on %s within %s; output:\n%s",
				endpoint, ddbStartTimeout, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}

	stopMu.Lock()
	stoppers = append(stoppers, stop)
	stopMu.Unlock()
	return endpoint, nil
}

// answers reports whether a DynamoDB endpoint answers HTTP (any status: an
// unsigned request gets a 400 MissingAuthenticationToken, which is fine).
func answers(c *http.Client, endpoint string) bool {
	resp, err := c.Post(endpoint, "application/x-amz-json-1.0", strings.NewReader("{}"))
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return true
}

// DynamoClient returns a client of the DynamoDB (Local) at endpoint, with
// dummy credentials and Region; opts adjust it (see CountCalls).
func DynamoClient(t testing.TB, endpoint string, opts ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	c, err := NewDynamoClient(endpoint, opts...)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return c
}

// NewDynamoClient is DynamoClient for code without a testing.TB, such as
// the child processes of a load test.
func NewDynamoClient(endpoint string, opts ...func(*dynamodb.Options)) (*dynamodb.Client, error) {
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithRegion(Region),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("testenv", "testenv", "")),
	)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	opts = append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		// DynamoDB Local sends no X-Amz-Crc32 header on error responses, and
		// this SDK version then checks the body against 0 and logs a WARN
		// ("response did not match expected checksum, 0, N") for every error.
		o.DisableValidateResponseChecksum = true
	}}, opts...)
	return dynamodb.NewFromConfig(cfg, opts...), nil
}

// CountCalls adds an SDK middleware that counts every HTTP request the
// client sends, retries included, into n.
func CountCalls(n *atomic.Int64) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("countCalls",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					n.Add(1)
					return next.HandleFinalize(ctx, in)
				}), middleware.After)
		})
	}
}

// CountCallsButReadAhead is CountCalls without the claim's read-ahead: a
// GetItem of an operation item (partition key "OP#…"), which the
// DynamoDB store sends beside each claim's transaction and does not wait
// for when the transaction answers first. A test that counts the calls a
// callback waits for, one per store call, counts with it.
func CountCallsButReadAhead(n *atomic.Int64) func(*dynamodb.Options) {
	type readAhead struct{}
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			if err := st.Initialize.Add(middleware.InitializeMiddlewareFunc("markReadAhead",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					if g, ok := in.Parameters.(*dynamodb.GetItemInput); ok {
						if pk, ok := g.Key[dynamo.PartitionKey].(*types.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, "OP#") {
							ctx = middleware.WithStackValue(ctx, readAhead{}, true)
						}
					}
					return next.HandleInitialize(ctx, in)
				}), middleware.Before); err != nil {
				return err
			}
			return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("countCallsButReadAhead",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					if middleware.GetStackValue(ctx, readAhead{}) == nil {
						n.Add(1)
					}
					return next.HandleFinalize(ctx, in)
				}), middleware.After)
		})
	}
}

// S is the DynamoDB string attribute v, for the items tests write.
func S(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

// CreateTable creates a fresh, uniquely named table as the product defines
// it (dynamo.CreateTable: partition key pk, on-demand billing, TTL on
// expires_at), waits until it is ACTIVE, and deletes it when the test ends.
func CreateTable(t testing.TB, endpoint string) (tableName string) {
	t.Helper()
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := fmt.Sprintf("%s-%d-%d-%s", tablePrefix(t.Name()), os.Getpid(), tableSeq.Add(1), hex.EncodeToString(rnd[:]))

	client := DynamoClient(t, endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := client.CreateTable(ctx, dynamo.CreateTable(name))
	if err != nil {
		t.Fatalf("testenv: create table %s on %s: %v", name, endpoint, err)
	}
	for {
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			t.Fatalf("testenv: describe table %s: %v", name, err)
		}
		if out.Table.TableStatus == types.TableStatusActive {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testenv: table %s not ACTIVE: %v", name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if _, err := client.UpdateTimeToLive(ctx, dynamo.EnableTTL(name)); err != nil {
		t.Fatalf("testenv: TTL on table %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return name
}

// tablePrefix makes a table-name-safe prefix ([a-zA-Z0-9_.-]) from a test name.
func tablePrefix(testName string) string {
	var b strings.Builder
	for _, r := range testName {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 100 {
			break
		}
	}
	if b.Len() == 0 {
		return "test"
	}
	return b.String()
}
