package dynamostore

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/idem"
)

// Attributes names the attributes of a record's item, and the prefix of
// its partition key. They are set once, here or in Options.Attributes,
// and read by every write, read and condition of the store.
type Attributes struct {
	PartitionKey string // the table's partition key (a string)
	Prefix       string // prepended to the operation key in the partition key: the namespace of records in a shared table
	State        string // idem.Record.State: "pending" or "completed"
	Tenant       string // idem.Record.Tenant
	Owner        string // idem.Record.Owner
	Function     string // idem.Record.Function
	Fingerprint  string // idem.Record.Fingerprint
	Result       string // a string attribute: the result's bytes must be UTF-8 text (JSON is); Claim refuses others
	CreatedAt    string // RFC 3339, whole seconds
	ExpiresAt    string // epoch seconds: the attribute to enable TTL on
}

// DefaultAttributes are the names used when Options.Attributes is nil.
var DefaultAttributes = Attributes{
	PartitionKey: "pk", Prefix: "OP#", State: "state", Tenant: "tenant_id", Owner: "user_id",
	Function: "function", Fingerprint: "fingerprint", Result: "result",
	CreatedAt: "created_at", ExpiresAt: "expires_at",
}

func (a *Attributes) check() error {
	for _, n := range []string{a.PartitionKey, a.State, a.Tenant, a.Owner, a.Function, a.Fingerprint, a.Result, a.CreatedAt, a.ExpiresAt} {
		if n == "" {
			return fmt.Errorf("dynamostore: every attribute needs a name: %+v", *a)
		}
	}
	return nil
}

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func num(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// Key is the DynamoDB key of the record of operation key id.
func (a *Attributes) Key(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{a.PartitionKey: str(a.Prefix + id)}
}

// Item is rec as a DynamoDB item.
func (a *Attributes) Item(rec idem.Record) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		a.PartitionKey: str(a.Prefix + rec.Key),
		a.State:        str(string(rec.State)),
		a.Tenant:       str(rec.Tenant),
		a.Owner:        str(rec.Owner),
		a.Function:     str(rec.Function),
		a.Fingerprint:  str(rec.Fingerprint),
		a.CreatedAt:    str(rec.CreatedAt.UTC().Format(time.RFC3339)),
		a.ExpiresAt:    num(rec.ExpiresAt.Unix()),
	}
	if rec.Result != nil {
		item[a.Result] = str(string(rec.Result))
	}
	return item
}

// Parse reads a record's item. Every attribute but the result must be
// present with its type, the partition key must carry the prefix and
// the state must be one of the two: an item that is not a record is an
// error, never a replay.
func (a *Attributes) Parse(item map[string]types.AttributeValue) (idem.Record, error) {
	var firstErr error
	get := func(name string) string {
		v, ok := item[name].(*types.AttributeValueMemberS)
		if !ok {
			if firstErr == nil {
				firstErr = fmt.Errorf("dynamostore: item attribute %s missing or not a string", name)
			}
			return ""
		}
		return v.Value
	}
	pk := get(a.PartitionKey)
	key, ok := strings.CutPrefix(pk, a.Prefix)
	if !ok && firstErr == nil {
		firstErr = fmt.Errorf("dynamostore: item %q is not a record (prefix %q)", pk, a.Prefix)
	}
	rec := idem.Record{
		Key: key, State: idem.State(get(a.State)), Tenant: get(a.Tenant), Owner: get(a.Owner),
		Function: get(a.Function), Fingerprint: get(a.Fingerprint),
	}
	created, err := time.Parse(time.RFC3339Nano, get(a.CreatedAt))
	if err != nil && firstErr == nil {
		firstErr = fmt.Errorf("dynamostore: item attribute %s: %w", a.CreatedAt, err)
	}
	rec.CreatedAt = created
	expires, ok := item[a.ExpiresAt].(*types.AttributeValueMemberN)
	if !ok {
		if firstErr == nil {
			firstErr = fmt.Errorf("dynamostore: item attribute %s missing or not a number", a.ExpiresAt)
		}
	} else if sec, err := strconv.ParseInt(expires.Value, 10, 64); err != nil {
		if firstErr == nil {
			firstErr = fmt.Errorf("dynamostore: item attribute %s: %w", a.ExpiresAt, err)
		}
	} else {
		rec.ExpiresAt = time.Unix(sec, 0)
	}
	if res, ok := item[a.Result].(*types.AttributeValueMemberS); ok {
		rec.Result = []byte(res.Value)
	}
	if firstErr == nil && rec.State != idem.StatePending && rec.State != idem.StateCompleted {
		firstErr = fmt.Errorf("dynamostore: item %q has state %q", pk, rec.State)
	}
	return rec, firstErr
}
