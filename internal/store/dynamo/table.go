package dynamo

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DeliveryDueIndex is the sparse global secondary index of tickets a
// delivery worker still has to move on: partition delivery_shard, sort
// delivery_due_at, keys only. Both attributes are on a ticket item only
// while its delivery is pending or delivering, so the index holds exactly
// the live deliveries and finding the due ones is a Query, never a Scan.
const DeliveryDueIndex = "delivery-due"

// TableInput is the one definition of the table, used by the tests and by
// cmd/seedlocal (template.yaml declares the same for AWS): partition key pk
// (S), on-demand billing, and the sparse delivery index. The TTL on
// expires_at is set separately, after the table is active.
func TableInput(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrShard), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrDueAt), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(DeliveryDueIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(attrShard), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(attrDueAt), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
	}
}

// EnsureDeliveryIndex adds DeliveryDueIndex to a table created before it
// existed, and waits until the index is active; it reports whether it
// added it. Tickets written before carry no delivery state and stay out.
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
	def := TableInput(table)
	_, err = c.UpdateTable(ctx, &dynamodb.UpdateTableInput{
		TableName:            &table,
		AttributeDefinitions: def.AttributeDefinitions,
		GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: &types.CreateGlobalSecondaryIndexAction{
			IndexName: def.GlobalSecondaryIndexes[0].IndexName,
			KeySchema: def.GlobalSecondaryIndexes[0].KeySchema, Projection: def.GlobalSecondaryIndexes[0].Projection,
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
