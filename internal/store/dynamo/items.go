package dynamo

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/idem/dynamostore"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
)

// Partition-key prefixes of the three item kinds.
const (
	// attrPK is the key attribute of every item.
	attrPK = PartitionKey

	prefixOperation = "OP#"
	prefixTicket    = "TICKET#"
	prefixUser      = "USER#"
)

// stringAttr and numberAttr build the S and N attribute values of an item.
func stringAttr(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func numberAttr(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// operationAttributes are the operation item's attribute names
// (docs/contract.md, Stored items), set here once for the claim, its
// condition and its parsing.
var operationAttributes = dynamostore.Attributes{
	PartitionKey: PartitionKey, Prefix: prefixOperation, State: "state", Tenant: "tenant_id",
	Owner: "user_id", Function: "function", Fingerprint: "fingerprint", Result: "result",
	CreatedAt: "created_at", ExpiresAt: TTLAttribute,
}

func ticketItem(t core.Ticket) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		attrPK:          stringAttr(prefixTicket + t.ID),
		"tenant_id":     stringAttr(t.TenantID),
		"user_id":       stringAttr(t.UserID),
		"operation_key": stringAttr(t.OperationKey),
		"arguments":     stringAttr(t.Arguments),
		"created_at":    stringAttr(t.CreatedAt.UTC().Format(time.RFC3339Nano)),
	}
	addDelivery(item, t.Delivery) // the outbox, in the same Put
	return item
}

func userItem(u core.User) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		attrPK:      stringAttr(prefixUser + u.ExternalID),
		"tenant_id": stringAttr(u.TenantID),
		"user_id":   stringAttr(u.UserID),
	}
	if u.Disabled {
		item["disabled"] = &types.AttributeValueMemberBOOL{Value: true}
	}
	return item
}

// itemReader reads attributes and remembers the first one that is missing
// or of the wrong type.
type itemReader struct {
	item map[string]types.AttributeValue
	err  error
}

func (r *itemReader) str(name string) string {
	v, ok := r.item[name].(*types.AttributeValueMemberS)
	if !ok {
		if r.err == nil {
			r.err = fmt.Errorf("dynamo: item attribute %s missing or not a string", name)
		}
		return ""
	}
	return v.Value
}

func (r *itemReader) optStr(name string) (string, bool) {
	v, ok := r.item[name].(*types.AttributeValueMemberS)
	if !ok {
		return "", false
	}
	return v.Value, true
}

func (r *itemReader) num(name string) int64 {
	v, ok := r.item[name].(*types.AttributeValueMemberN)
	if !ok {
		if r.err == nil {
			r.err = fmt.Errorf("dynamo: item attribute %s missing or not a number", name)
		}
		return 0
	}
	i, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("dynamo: item attribute %s: %w", name, err)
	}
	return i
}

func (r *itemReader) time(name string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, r.str(name))
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("dynamo: item attribute %s: %w", name, err)
	}
	return t
}

func parseTicket(item map[string]types.AttributeValue) (core.Ticket, error) {
	r := itemReader{item: item}
	t := core.Ticket{
		ID:           trimPrefix(r.str(attrPK), prefixTicket),
		TenantID:     r.str("tenant_id"),
		UserID:       r.str("user_id"),
		OperationKey: r.str("operation_key"),
		Arguments:    r.str("arguments"),
		CreatedAt:    r.time("created_at"),
	}
	t.Delivery = parseCoreDelivery(item)
	return t, r.err
}

func parseUser(item map[string]types.AttributeValue) (core.User, error) {
	r := itemReader{item: item}
	u := core.User{
		ExternalID: trimPrefix(r.str(attrPK), prefixUser),
		TenantID:   r.str("tenant_id"),
		UserID:     r.str("user_id"),
	}
	if d, ok := item["disabled"].(*types.AttributeValueMemberBOOL); ok {
		u.Disabled = d.Value
	}
	if r.err == nil && (u.TenantID == "" || u.UserID == "") {
		r.err = fmt.Errorf("dynamo: user item %s has an empty tenant_id or user_id", u.ExternalID)
	}
	return u, r.err
}

func trimPrefix(v, prefix string) string {
	if len(v) >= len(prefix) && v[:len(prefix)] == prefix {
		return v[len(prefix):]
	}
	return v
}

// PendingTicketID reads a stream record's new image (its DynamoDB JSON,
// as the stream delivers it) and returns the outbox id of an item pending
// delivery: a ticket's id for a ticket item, the item's key for an
// effect's item (one with delivery_kind). ok is false for any other item
// (an operation, a user, an item in another state or without delivery)
// and for an empty or null image (a removal, a stream without new
// images). An image that does not decode is an error.
func PendingTicketID(newImage []byte) (id string, ok bool, err error) {
	if len(newImage) == 0 || string(newImage) == "null" {
		return "", false, nil
	}
	item, err := attributevalue.UnmarshalMapJSON(newImage)
	if err != nil {
		return "", false, fmt.Errorf("dynamo: stream image: %w", err)
	}
	// An attribute that is absent or NULL reads as ""; one of another
	// type is an error.
	var pk, state, kind string
	for name, dst := range map[string]*string{attrPK: &pk, attrState: &state, attrEffectKind: &kind} {
		if v, present := item[name]; present {
			if err := attributevalue.Unmarshal(v, dst); err != nil {
				return "", false, fmt.Errorf("dynamo: stream image: %s: %w", name, err)
			}
		}
	}
	if delivery.State(state) != delivery.StatePending {
		return "", false, nil
	}
	if id, isTicket := strings.CutPrefix(pk, prefixTicket); isTicket {
		return id, id != "", nil
	}
	if kind == "" {
		return "", false, nil
	}
	if _, valid := outboxKey(pk); !valid || !delivery.IsEffect(pk) {
		return "", false, nil
	}
	return pk, true, nil
}

// The delivery record's attributes on the ticket item. delivery_shard and
// delivery_due_at are the keys of DeliveryDueIndex and are present only
// while the delivery is live (pending or delivering).
const (
	attrState          = "delivery_state"
	attrDueAt          = DeliveryDueAt // epoch seconds
	attrShard          = DeliveryShard
	attrAttempts       = "delivery_attempts"
	attrLookupFailures = "delivery_lookup_failures"
	attrSentUnknown    = "delivery_unknown" // BOOL: a send may have created it
	attrSentAt         = "delivery_sent_at" // epoch milliseconds: the last unknown send's start
	attrLeaseUntil     = "lease_until"      // epoch seconds
	attrLeaseOwner     = "delivery_lease"
	attrError          = "delivery_error"
	attrExternalID     = "external_id"
	attrExternalURL    = "external_url"
	attrDeliveredAt    = "delivered_at" // RFC 3339

	// An effect's item (core.ItemWrite.Effect) carries, beside the
	// record, what its Claim returns of the effect (delivery.Effect).
	attrEffectKind    = "delivery_kind"
	attrEffectKey     = "delivery_key"     // core.Effect.ID, the delivery key
	attrEffectTicket  = "delivery_ticket"  // absent for an effect that follows no ticket
	attrEffectPayload = "delivery_payload" // the JSON text
)

// shard is the one partition of DeliveryDueIndex. Live deliveries are few
// (they leave the index once delivered), well inside one partition's
// throughput; a larger fleet would spread them over a few shards and
// query each.
const shard = "due"

// addDelivery puts a new ticket's delivery record on its item.
func addDelivery(item map[string]types.AttributeValue, d *core.DeliveryStatus) {
	if d == nil {
		return
	}
	item[attrState] = stringAttr(d.State)
	item[attrAttempts] = numberAttr(0)
	if delivery.State(d.State).Live() {
		item[attrShard] = stringAttr(shard)
		item[attrDueAt] = numberAttr(d.DueAt.Unix())
	}
}

// addEffect puts the delivery record of an effect on its new item: the
// record a ticket's has (pending, due at e.DueAt in whole seconds, in
// DeliveryDueIndex, with the creating span's traceparent when there is
// one), and the effect's kind, delivery key, ticket and payload.
func addEffect(item map[string]types.AttributeValue, e core.Effect, traceparent string) {
	addDelivery(item, &core.DeliveryStatus{State: core.DeliveryPending, DueAt: e.DueAt})
	item[attrEffectKind] = stringAttr(e.Kind)
	item[attrEffectKey] = stringAttr(e.ID)
	if e.TicketID != "" {
		item[attrEffectTicket] = stringAttr(e.TicketID)
	}
	item[attrEffectPayload] = stringAttr(string(e.Payload))
	if traceparent != "" {
		item[attrTraceparent] = stringAttr(traceparent)
	}
}

// outboxKey is the key of the item of the outbox id: a ticket's item for
// a bare ticket id, the item itself for an effect's key. ok is false for
// an id that names no outbox record's item: a key of a ticket's,
// operation's or user's item (a ticket's record is named by its bare id).
func outboxKey(id string) (key map[string]types.AttributeValue, ok bool) {
	if !delivery.IsEffect(id) {
		return ticketKey(id), true
	}
	for _, p := range []string{prefixTicket, prefixOperation, prefixUser} {
		if strings.HasPrefix(id, p) {
			return nil, false
		}
	}
	return map[string]types.AttributeValue{attrPK: stringAttr(id)}, true
}

// outboxID is the outbox id of the item whose pk is pk: a ticket's bare
// id, or an effect's key.
func outboxID(pk string) string {
	if id, ok := strings.CutPrefix(pk, prefixTicket); ok {
		return id
	}
	return pk
}

func parseCoreDelivery(item map[string]types.AttributeValue) *core.DeliveryStatus {
	st, ok := item[attrState].(*types.AttributeValueMemberS)
	if !ok {
		return nil
	}
	r := itemReader{item: item}
	d := &core.DeliveryStatus{State: st.Value}
	d.ExternalID, _ = r.optStr(attrExternalID)
	d.ExternalURL, _ = r.optStr(attrExternalURL)
	if _, ok := item[attrDueAt]; ok {
		d.DueAt = time.Unix(r.num(attrDueAt), 0)
	}
	return d
}
