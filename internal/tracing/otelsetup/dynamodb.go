//go:build !notrace

package otelsetup

import (
	"context"
	"maps"
	"reflect"
	"slices"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	smithytracing "github.com/aws/smithy-go/tracing"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/aivax-examples/idempotent-callback/internal/tracing"
)

// withTracerProvider is an aws.Config service option that sets the
// TracerProvider of every client made from the configuration (each
// service's Options has that field; the configuration has none).
func withTracerProvider(tp smithytracing.TracerProvider) func(string, any) {
	want := reflect.TypeFor[smithytracing.TracerProvider]()
	return func(_ string, opts any) {
		v := reflect.ValueOf(opts)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			return
		}
		if f := v.Elem().FieldByName("TracerProvider"); f.IsValid() && f.CanSet() && f.Type() == want {
			f.Set(reflect.ValueOf(tp))
		}
	}
}

// requestAttributes is a middleware that adds to the span of each request
// (the SDK's operation span, which is ctx's) what the SDK's own tracing
// leaves out: the region, and for DynamoDB the tables and, for a GetItem,
// the consistent-read flag and the read-ahead mark (readAhead(ctx), when
// readAhead is set: the claim store marks the context of its read-ahead).
// No key or item value goes into an attribute.
func requestAttributes(readAhead func(context.Context) bool) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("otelsetup.RequestAttributes", func(
			ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler,
		) (middleware.InitializeOutput, middleware.Metadata, error) {
			if span := trace.SpanFromContext(ctx); span.IsRecording() {
				span.SetAttributes(semconv.CloudRegion(awsmiddleware.GetRegion(ctx)))
				span.SetAttributes(dynamoDBAttributes(ctx, in.Parameters, readAhead)...)
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
	}
}

// dynamoDBAttributes are the attributes of a DynamoDB request's input
// (none for another service's).
func dynamoDBAttributes(ctx context.Context, in any, readAhead func(context.Context) bool) []attribute.KeyValue {
	var tables []string
	add := func(name *string) {
		if name != nil && !slices.Contains(tables, *name) {
			tables = append(tables, *name)
		}
	}
	var extra []attribute.KeyValue
	switch v := in.(type) {
	case *dynamodb.GetItemInput:
		add(v.TableName)
		if v.ConsistentRead != nil {
			extra = append(extra, semconv.AWSDynamoDBConsistentRead(*v.ConsistentRead))
		}
		if readAhead != nil {
			extra = append(extra, tracing.AttrReadAhead.Bool(readAhead(ctx)))
		}
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range v.TransactItems {
			switch {
			case it.Put != nil:
				add(it.Put.TableName)
			case it.Update != nil:
				add(it.Update.TableName)
			case it.ConditionCheck != nil:
				add(it.ConditionCheck.TableName)
			case it.Delete != nil:
				add(it.Delete.TableName)
			}
		}
	case *dynamodb.TransactGetItemsInput:
		for _, it := range v.TransactItems {
			if it.Get != nil {
				add(it.Get.TableName)
			}
		}
	case *dynamodb.BatchGetItemInput:
		for _, k := range slices.Sorted(maps.Keys(v.RequestItems)) {
			add(&k)
		}
	case *dynamodb.BatchWriteItemInput:
		for _, k := range slices.Sorted(maps.Keys(v.RequestItems)) {
			add(&k)
		}
	default:
		// PutItem, UpdateItem, DeleteItem, Query, Scan and the table
		// operations name their one table in TableName.
		if !isDynamoDBInput(in) {
			return nil
		}
		if f := reflect.ValueOf(in).Elem().FieldByName("TableName"); f.IsValid() && f.Type() == reflect.TypeFor[*string]() {
			add(f.Interface().(*string))
		}
	}
	out := []attribute.KeyValue{semconv.DBSystemNameAWSDynamoDB}
	if len(tables) > 0 {
		out = append(out, semconv.AWSDynamoDBTableNames(tables...))
	}
	return append(out, extra...)
}

// dynamoDBPkg is the import path of the DynamoDB client's input types.
var dynamoDBPkg = reflect.TypeFor[dynamodb.GetItemInput]().PkgPath()

func isDynamoDBInput(in any) bool {
	t := reflect.TypeOf(in)
	return t != nil && t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct && t.Elem().PkgPath() == dynamoDBPkg
}
