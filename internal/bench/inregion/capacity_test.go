package inregion

import (
	"encoding/json"
	"strings"
	"testing"
)

func mustItem(t *testing.T, s string) item {
	t.Helper()
	var it item
	if err := json.Unmarshal([]byte(s), &it); err != nil {
		t.Fatal(err)
	}
	return it
}

// Item sizes by the Developer Guide's rules ("Item sizes and capacity unit
// consumption"), on hand-computed examples.
func TestItemSize(t *testing.T) {
	for _, c := range []struct {
		item string
		want int
	}{
		{`{"pk":{"S":"abc"}}`, 2 + 3},
		{`{"pk":{"S":"é"}}`, 2 + 2},                   // UTF-8 bytes
		{`{"n":{"N":"1733100000"}}`, 1 + (5+1)/2 + 1}, // 17331: 5 significant digits
		{`{"n":{"N":"-0.00120"}}`, 1 + 1 + 1},         // 12
		{`{"n":{"N":"0"}}`, 1 + 1},                    // no significant digit
		{`{"b":{"B":"AAEC"}}`, 1 + 3},                 // 3 raw bytes
		{`{"t":{"BOOL":true},"z":{"NULL":true}}`, 1 + 1 + 1 + 1},
		{`{"l":{"L":[{"S":"ab"},{"N":"7"}]}}`, 1 + 3 + 2 + 2},
		{`{"m":{"M":{"k":{"S":"v"}}}}`, 1 + 3 + 1 + 1},
		{`{"ss":{"SS":["a","bc"]}}`, 2 + 3},
		{`{}`, 0},
	} {
		if got := itemSize(mustItem(t, c.item)); got != c.want {
			t.Errorf("itemSize(%s) = %d, want %d", c.item, got, c.want)
		}
	}
}

func TestUnits(t *testing.T) {
	for _, c := range []struct {
		size      int
		w, rs, re float64
	}{{0, 1, 1, 0.5}, {1024, 1, 1, 0.5}, {1025, 2, 1, 0.5}, {4096, 4, 1, 0.5}, {4097, 5, 2, 1}} {
		if w, rs, re := writeUnits(c.size), readUnits(c.size, true), readUnits(c.size, false); w != c.w || rs != c.rs || re != c.re {
			t.Errorf("size %d: %g WCU, %g/%g RCU; want %g, %g/%g", c.size, w, rs, re, c.w, c.rs, c.re)
		}
	}
}

// The capacity of each answer the benchmarks see, computed from the
// request and response bodies.
func TestComputed(t *testing.T) {
	big := strings.Repeat("x", 1500)
	tx := `{"TransactItems":[{"Put":{"TableName":"t","Item":{"pk":{"S":"op"},"v":{"S":"` + big + `"}}}},` +
		`{"Put":{"TableName":"t","Item":{"pk":{"S":"ticket"}}}}]}`
	cancelled := `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","CancellationReasons":[` +
		`{"Code":"ConditionalCheckFailed","Item":{"pk":{"S":"op"},"v":{"S":"` + big + `"}}},{"Code":"None"}]}`
	for _, c := range []struct {
		name, op, req, resp string
		status              int
		cancelled, condFail bool
		want                Capacity
	}{
		{"transaction, 1.5 KB + tiny", "TransactWriteItems", tx, `{}`, 200, false, false, Capacity{WCU: 2*2 + 2*1}},
		{"cancelled transaction: existing 1.5 KB, absent", "TransactWriteItems", tx, cancelled, 400, true, false, Capacity{WCU: 2*2 + 2*1}},
		{"cancelled transaction without old images", "TransactWriteItems", tx, `{"CancellationReasons":[{"Code":"ConditionalCheckFailed"},{"Code":"None"}]}`, 400, true, false, Capacity{WCU: 2 + 2}},
		{"transaction with a ConditionCheck (the claim's check of the other policy's key)", "TransactWriteItems",
			`{"TransactItems":[{"Put":{"TableName":"t","Item":{"pk":{"S":"op"}}}},{"ConditionCheck":{"TableName":"t","Key":{"pk":{"S":"OP#alt"}},` +
				`"ExpressionAttributeValues":{":now":{"N":"1733100000"},":fp":{"S":"` + strings.Repeat("f", 64) + `"}}}}]}`,
			`{}`, 200, false, false, Capacity{WCU: 2 + 2}},
		{"throttled transaction", "TransactWriteItems", tx, `{"__type":"x#ThrottlingException"}`, 400, false, false, Capacity{}},
		{"consistent read, found", "GetItem", `{"ConsistentRead":true}`, `{"Item":{"pk":{"S":"` + big + big + big + `"}}}`, 200, false, false, Capacity{RCU: 2}},
		{"consistent read, missing", "GetItem", `{"ConsistentRead":true}`, `{}`, 200, false, false, Capacity{RCU: 1}},
		{"eventually consistent read", "GetItem", `{}`, `{}`, 200, false, false, Capacity{RCU: 0.5}},
		{"query", "Query", `{}`, `{"Items":[{"a":{"S":"` + big + big + `"}},{"a":{"S":"` + big + `"}}]}`, 200, false, false, Capacity{RCU: 1.0}},
		{"put", "PutItem", `{"Item":{"pk":{"S":"` + big + `"}}}`, `{}`, 200, false, false, Capacity{WCU: 2}},
		{"put, condition fails, no image", "PutItem", `{"Item":{"pk":{"S":"` + big + `"}}}`, `{}`, 400, false, true, Capacity{WCU: 1}},
		{"update, new image returned", "UpdateItem", `{"Key":{"pk":{"S":"a"}},"ExpressionAttributeValues":{":v":{"S":"b"}}}`,
			`{"Attributes":{"pk":{"S":"a"},"r":{"S":"` + big + `"}}}`, 200, false, false, Capacity{WCU: 2}},
	} {
		got, ok := computed(c.op, []byte(c.req), []byte(c.resp), c.status, c.cancelled, c.condFail)
		if !ok || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, ok, c.want)
		}
	}
	if _, ok := computed("Scan", nil, nil, 200, false, false); ok {
		t.Errorf("Scan: computed; want not covered")
	}
}

// ConsumedCapacity as DynamoDB returns it: one object for a single-item
// operation, a list for a transaction.
func TestReported(t *testing.T) {
	for _, c := range []struct {
		op, resp string
		want     Capacity
		ok       bool
	}{
		{"GetItem", `{"ConsumedCapacity":{"CapacityUnits":1,"TableName":"t"}}`, Capacity{RCU: 1}, true},
		{"PutItem", `{"ConsumedCapacity":{"CapacityUnits":2,"TableName":"t"}}`, Capacity{WCU: 2}, true},
		{"TransactWriteItems", `{"ConsumedCapacity":[{"CapacityUnits":4,"WriteCapacityUnits":4,"TableName":"t"}]}`, Capacity{WCU: 4}, true},
		{"PutItem", `{}`, Capacity{}, false},
		{"PutItem", `not json`, Capacity{}, false},
	} {
		got, ok := reported(c.op, []byte(c.resp))
		if got != c.want || ok != c.ok {
			t.Errorf("%s %s: %+v, %v; want %+v, %v", c.op, c.resp, got, ok, c.want, c.ok)
		}
	}
}
