package dynamostore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/idem/dynamostore"
)

// An order: the claim of the order's key, the order item and the
// decrement of the stock, guarded by its condition, commit in one
// TransactWriteItems, or none of them does. A ConditionCheck makes the
// customer's account part of the same decision. The second call of the
// same request returns the first order and writes nothing; an order the
// stock cannot cover is refused, writes nothing and claims nothing, so
// its retry after a restock goes through.
//
// It runs on DynamoDB Local, at the endpoint in $DYNAMODB_ENDPOINT. The
// tests of this package set it themselves when it is unset: they start
// DynamoDB Local from the jar `make tools` downloads into .cache. To run
// the example any other way, start DynamoDB Local first:
//
//	make dynamodb-local    # in another terminal; port 8000
//	export DYNAMODB_ENDPOINT=http://127.0.0.1:8000
func Example_order() {
	ctx := context.Background()
	endpoint := os.Getenv("DYNAMODB_ENDPOINT")
	if endpoint == "" {
		fmt.Println("DYNAMODB_ENDPOINT is not set: start DynamoDB Local (make dynamodb-local) and export DYNAMODB_ENDPOINT=http://127.0.0.1:8000")
		return
	}
	client := dynamodb.New(dynamodb.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("example", "example", ""),
	})
	table, err := createTable(ctx, client)
	if err != nil {
		fmt.Println(err)
		return
	}
	put(ctx, client, table, "STOCK#A-1", map[string]types.AttributeValue{"qty": &types.AttributeValueMemberN{Value: "3"}})
	put(ctx, client, table, "CUSTOMER#c-7", map[string]types.AttributeValue{"status": &types.AttributeValueMemberS{Value: "active"}})

	orders := &idem.Guard[[]types.TransactWriteItem]{
		Store:     dynamostore.New(client, table, dynamostore.Options{}),
		Retention: 24 * time.Hour,
	}
	place := func(requestID string, qty int) idem.Outcome {
		call := idem.Call{Tenant: "shop-1", Owner: "c-7", RequestID: requestID, Function: "create_order",
			Arguments: fmt.Appendf(nil, `{"sku":"A-1","qty":%d}`, qty)}
		return orders.Do(ctx, call, func(cl idem.Claim) ([]byte, []types.TransactWriteItem, error) {
			orderID := "order-" + cl.Key.ID[:8]
			q := &types.AttributeValueMemberN{Value: fmt.Sprint(qty)}
			return []byte(`{"order_id":"` + orderID + `"}`), []types.TransactWriteItem{
				{Put: &types.Put{ // the order (TableName nil: the store's table)
					Item: map[string]types.AttributeValue{
						"pk": &types.AttributeValueMemberS{Value: "ORDER#" + orderID}, "sku": &types.AttributeValueMemberS{Value: "A-1"}, "qty": q,
					},
					ConditionExpression: aws.String("attribute_not_exists(pk)"),
				}},
				{Update: &types.Update{ // the stock, never below zero
					Key:                       key("STOCK#A-1"),
					UpdateExpression:          aws.String("SET qty = qty - :q"),
					ConditionExpression:       aws.String("qty >= :q"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":q": q},
				}},
				{ConditionCheck: &types.ConditionCheck{ // the customer may order
					Key:                       key("CUSTOMER#c-7"),
					ConditionExpression:       aws.String("#s = :active"),
					ExpressionAttributeNames:  map[string]string{"#s": "status"},
					ExpressionAttributeValues: map[string]types.AttributeValue{":active": &types.AttributeValueMemberS{Value: "active"}},
				}},
			}, nil
		})
	}
	show := func(o idem.Outcome) {
		if o.Result != nil {
			fmt.Println(o.Status, string(o.Result))
		} else {
			fmt.Println(o.Status)
		}
	}

	show(place("req-1", 2))  // created
	show(place("req-1", 2))  // the retry: the first order, nothing written
	big := place("req-2", 5) // more than the stock left
	show(big)
	fmt.Println("orders:", count(ctx, client, table, "ORDER#"), "stock:", stock(ctx, client, table))
	held, _ := orders.Store.(*dynamostore.Store).Get(ctx, big.Key)
	fmt.Println("req-2 claimed:", held != nil)
	put(ctx, client, table, "STOCK#A-1", map[string]types.AttributeValue{"qty": &types.AttributeValueMemberN{Value: "10"}})
	show(place("req-2", 5)) // after the restock
	fmt.Println("orders:", count(ctx, client, table, "ORDER#"), "stock:", stock(ctx, client, table))
	// Output:
	// created {"order_id":"order-538d20de"}
	// replayed {"order_id":"order-538d20de"}
	// refused
	// orders: 1 stock: 1
	// req-2 claimed: false
	// created {"order_id":"order-0d3f9f6b"}
	// orders: 2 stock: 5
}

func key(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}
}

func put(ctx context.Context, client *dynamodb.Client, table, pk string, attrs map[string]types.AttributeValue) {
	item := key(pk)
	for k, v := range attrs {
		item[k] = v
	}
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
		fmt.Println(err)
	}
}

func count(ctx context.Context, client *dynamodb.Client, table, prefix string) int32 {
	out, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: &table, Select: types.SelectCount, ConsistentRead: aws.Bool(true),
		FilterExpression:          aws.String("begins_with(pk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: prefix}}})
	if err != nil {
		fmt.Println(err)
		return -1
	}
	return out.Count
}

func stock(ctx context.Context, client *dynamodb.Client, table string) string {
	out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key("STOCK#A-1"), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return err.Error()
	}
	return out.Item["qty"].(*types.AttributeValueMemberN).Value
}

// createTable makes a table with the store's defaults: a string
// partition key pk, TTL on expires_at.
func createTable(ctx context.Context, client *dynamodb.Client) (string, error) {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := "orders-" + hex.EncodeToString(rnd[:])
	if _, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            &name,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}); err != nil {
		return "", err
	}
	if err := dynamodb.NewTableExistsWaiter(client).Wait(ctx, &dynamodb.DescribeTableInput{TableName: &name}, time.Minute); err != nil {
		return "", err
	}
	_, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: &name,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("expires_at"), Enabled: aws.Bool(true)}})
	return name, err
}
