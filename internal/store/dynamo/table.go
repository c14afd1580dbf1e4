package dynamo

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// EnsureDeliveryIndex adds DeliveryDueIndex to a table that lacks it, and
// waits until the index is active; it reports whether it added it. Tickets
// already in the table carry no delivery state and stay out of the index.
func EnsureDeliveryIndex(ctx context.Context, c *dynamodb.Client, table string) (bool, error) {
	active := func() (found, ready bool, err error) {
		out, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
		if err != nil {
			return false, false, fmt.Errorf("describe table %s: %w", table, err)
		}
		for _, gsi := range out.Table.GlobalSecondaryIndexes {
			if aws.ToString(gsi.IndexName) == DeliveryDueIndex {
				return true, gsi.IndexStatus == types.IndexStatusActive || gsi.IndexStatus == "", nil
			}
		}
		return false, false, nil
	}
	found, _, err := active()
	if err != nil || found {
		return false, err
	}
	index := DeliveryIndex()
	_, err = c.UpdateTable(ctx, &dynamodb.UpdateTableInput{
		TableName:            &table,
		AttributeDefinitions: AttributeDefinitions(),
		GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: &types.CreateGlobalSecondaryIndexAction{
			IndexName: index.IndexName, KeySchema: index.KeySchema, Projection: index.Projection,
		}}},
	})
	if err != nil {
		return false, fmt.Errorf("add index %s to %s: %w", DeliveryDueIndex, table, err)
	}
	for {
		if _, ready, err := active(); err != nil || ready {
			return true, err
		}
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
