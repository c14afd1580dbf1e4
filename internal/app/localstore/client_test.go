package localstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/logging"

	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// The local programs' client of DynamoDB Local answers an expected error
// (a failed condition, as a repeated callback's claim meets) without the
// SDK writing anything: DynamoDB Local's error answers carry a CRC32 of 0,
// which a validating client reports on stderr, a line that is not the
// local server's JSON.
func TestDynamoDBClientOnDynamoDBLocalLogsNothing(t *testing.T) {
	endpoint := testenv.DynamoDB(t)
	table := testenv.CreateTable(t, endpoint)
	awsCfg, err := LocalAWSConfig(context.Background(), "", endpoint, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var sdkLog []string
	awsCfg.Logger = logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
		mu.Lock()
		defer mu.Unlock()
		sdkLog = append(sdkLog, string(c)+" "+fmt.Sprintf(format, v...))
	})
	c := DynamoDBClient(awsCfg, endpoint)
	put := &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "OP#x"}},
		ConditionExpression: aws.String("attribute_not_exists(pk)")}
	if _, err := c.PutItem(context.Background(), put); err != nil {
		t.Fatal(err)
	}
	var failed *types.ConditionalCheckFailedException
	if _, err := c.PutItem(context.Background(), put); !errors.As(err, &failed) {
		t.Fatalf("second put: %v, want ConditionalCheckFailedException", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sdkLog) > 0 {
		t.Errorf("the SDK logged:\n%s", strings.Join(sdkLog, "\n"))
	}
}
