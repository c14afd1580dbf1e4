package dynamo

import (
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
