// Package tableschema is the one Go definition of the callback's DynamoDB
// table: a string partition key pk, no sort key, on-demand billing, and TTL
// on expires_at (docs/contract.md, Stored items). cmd/seedlocal and
// testenv.CreateTable create tables from it; template.yaml declares the
// deployed table, and this package's test holds the two to each other.
package tableschema

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
)

// AttributeDefinitions are the key attributes' types.
func AttributeDefinitions() []types.AttributeDefinition {
	return []types.AttributeDefinition{{AttributeName: aws.String(PartitionKey), AttributeType: types.ScalarAttributeTypeS}}
}

// KeySchema is the table's primary key: pk as the hash key, nothing else.
func KeySchema() []types.KeySchemaElement {
	return []types.KeySchemaElement{{AttributeName: aws.String(PartitionKey), KeyType: types.KeyTypeHash}}
}

// CreateTable is the request that creates the table under name.
func CreateTable(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: AttributeDefinitions(),
		KeySchema:            KeySchema(),
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
