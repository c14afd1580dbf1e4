package otelsetup

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"go.opentelemetry.io/contrib/instrumentation/github.com/aws/aws-sdk-go-v2/otelaws" //nolint:staticcheck // deprecated upstream without a release that drops it; its attribute builders are what mark the read-ahead (the SDK's own smithy tracing has none)
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/aivax-examples/idempotent-callback/internal/tracing"
)

// dynamoDBAttributes adds what OpenTelemetry's DynamoDB attributes leave
// out: the tables of a TransactWriteItems, and the read-ahead mark. No
// key or item value is read into an attribute, only the key's prefix is
// compared.
func dynamoDBAttributes(readAheadPrefix string) otelaws.AttributeBuilder {
	base := otelaws.DynamoDBAttributeBuilder
	return func(ctx context.Context, in middleware.InitializeInput, out middleware.InitializeOutput) []attribute.KeyValue {
		attrs := base(ctx, in, out)
		switch v := in.Parameters.(type) {
		case *dynamodb.GetItemInput:
			if readAheadPrefix != "" {
				pk, _ := v.Key["pk"].(*types.AttributeValueMemberS)
				attrs = append(attrs, tracing.AttrReadAhead.Bool(pk != nil && strings.HasPrefix(pk.Value, readAheadPrefix)))
			}
		case *dynamodb.TransactWriteItemsInput:
			var tables []string
			for _, it := range v.TransactItems {
				var name *string
				switch {
				case it.Put != nil:
					name = it.Put.TableName
				case it.Update != nil:
					name = it.Update.TableName
				case it.ConditionCheck != nil:
					name = it.ConditionCheck.TableName
				case it.Delete != nil:
					name = it.Delete.TableName
				}
				if name != nil && !contains(tables, *name) {
					tables = append(tables, *name)
				}
			}
			attrs = append(attrs, semconv.AWSDynamoDBTableNames(tables...))
		}
		return attrs
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
