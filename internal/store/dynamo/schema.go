package dynamo

// The one Go definition of the callback's DynamoDB table: a string
// partition key pk, no sort key, on-demand billing, TTL on expires_at
// (docs/contract.md, Stored items), and the sparse index a delivery
// worker queries for due tickets. cmd/seedlocal and testenv.CreateTable
// create tables from it; template.yaml declares the deployed table, and
// TestMatchesTemplate holds the two to each other.

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

const (
	// PartitionKey is the table's only key attribute (a string).
	PartitionKey = "pk"
	// TTLAttribute holds an operation's expiry in epoch seconds; DynamoDB's
	// TTL deletes items whose value has passed.
	TTLAttribute = "expires_at"

	// DeliveryDueIndex is the sparse global secondary index of tickets a
	// delivery worker still has to move on: partition DeliveryShard, sort
	// DeliveryDueAt, keys only. Both attributes are on a ticket item only
	// while its delivery is pending or delivering, so the index holds
	// exactly the live deliveries and finding the due ones is a Query,
	// never a Scan.
	DeliveryDueIndex = "delivery-due"
	// DeliveryShard is the index's partition key (a string).
	DeliveryShard = "delivery_shard"
	// DeliveryDueAt is the index's sort key: when the delivery is due, in
	// epoch seconds.
	DeliveryDueAt = "delivery_due_at"
)

// AttributeDefinitions are the types of the table's and the index's key
// attributes.
func AttributeDefinitions() []types.AttributeDefinition {
	return []types.AttributeDefinition{
		{AttributeName: aws.String(PartitionKey), AttributeType: types.ScalarAttributeTypeS},
		{AttributeName: aws.String(DeliveryShard), AttributeType: types.ScalarAttributeTypeS},
		{AttributeName: aws.String(DeliveryDueAt), AttributeType: types.ScalarAttributeTypeN},
	}
}

// DeliveryIndex is DeliveryDueIndex's definition.
func DeliveryIndex() types.GlobalSecondaryIndex {
	return types.GlobalSecondaryIndex{
		IndexName: aws.String(DeliveryDueIndex),
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(DeliveryShard), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(DeliveryDueAt), KeyType: types.KeyTypeRange},
		},
		Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
	}
}

// KeySchema is the table's primary key: pk as the hash key, nothing else.
func KeySchema() []types.KeySchemaElement {
	return []types.KeySchemaElement{{AttributeName: aws.String(PartitionKey), KeyType: types.KeyTypeHash}}
}

// CreateTable is the request that creates the table under name.
func CreateTable(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:              aws.String(name),
		BillingMode:            types.BillingModePayPerRequest,
		AttributeDefinitions:   AttributeDefinitions(),
		KeySchema:              KeySchema(),
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{DeliveryIndex()},
		// The delivery function reads new ticket items from the stream.
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewImage},
	}
}

// EnableTTL is the request that turns TTL on for the table under name (it
// cannot be part of CreateTable).
func EnableTTL(name string) *dynamodb.UpdateTimeToLiveInput {
	return &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(TTLAttribute),
			Enabled:       aws.Bool(true),
		},
	}
}
