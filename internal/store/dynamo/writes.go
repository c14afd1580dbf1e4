package dynamo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
)

// The generic items of core.Writes.Items: each write is one action of the
// claim's TransactWriteItems, after the tickets' Puts, on the item whose
// pk is the write's key (a ticket's key, core.TicketKey, is its item's
// pk). Values are kept as S (string), N (int64), BOOL (bool) and L of S
// ([]string), and read back as those Go types.

// storeAttrs are the attributes the store keeps on items for itself: the
// key, the operation's expiry, and the delivery record with its lease and
// trace. A write may not set them, and reads leave them out of an item's
// attributes (core.StoredItem.Attrs, core.Ticket.Attrs).
var storeAttrs = map[string]bool{
	attrPK: true, TTLAttribute: true, attrTraceparent: true,
	attrState: true, attrDueAt: true, attrShard: true, attrAttempts: true, attrLookupFailures: true,
	attrSentUnknown: true, attrSentAt: true, attrLeaseUntil: true, attrLeaseOwner: true, attrError: true,
	attrExternalID: true, attrExternalURL: true, attrDeliveredAt: true,
	attrEffectKind: true, attrEffectKey: true, attrEffectTicket: true, attrEffectPayload: true,
}

// ticketFields are a ticket item's typed attributes (core.Ticket's
// fields): not in Ticket.Attrs, and not written by an item write, whose
// conditions may still name them (tenant_id, user_id).
var ticketFields = map[string]bool{
	core.AttrTenantID: true, core.AttrUserID: true, "operation_key": true, "arguments": true, "created_at": true,
}

// itemActions translates items into the claim's transaction actions, in
// order, so that dynamostore's RefusedError index of a failed condition
// counts the tickets first and then these. traceparent is the creating
// span's, kept on each effect's delivery record as a ticket's is.
func (s *Store) itemActions(items []core.ItemWrite, traceparent string) ([]types.TransactWriteItem, error) {
	if err := core.CheckItemWrites(items); err != nil {
		return nil, err
	}
	actions := make([]types.TransactWriteItem, 0, len(items))
	for i, w := range items {
		if err := checkNames(w); err != nil {
			return nil, fmt.Errorf("dynamo: item write %d: %w", i, err)
		}
		a, err := s.itemAction(w, traceparent)
		if err != nil {
			return nil, fmt.Errorf("dynamo: item write %d: %w", i, err)
		}
		actions = append(actions, a)
	}
	return actions, nil
}

// checkNames refuses a write of an attribute the store keeps for itself,
// or of a ticket's typed field on a ticket's item: either would change
// what the store reads as the key, the delivery or the ticket.
func checkNames(w core.ItemWrite) error {
	_, ticket := strings.CutPrefix(w.Key, core.TicketKeyPrefix)
	names := slices.Concat(slices.Collect(maps.Keys(w.Set)), slices.Collect(maps.Keys(w.Append)))
	for _, name := range names {
		switch {
		case storeAttrs[name]:
			return fmt.Errorf("attribute %s is the store's", name)
		case ticket && ticketFields[name]:
			return fmt.Errorf("attribute %s is a ticket's own field", name)
		case name == "":
			return errors.New("an attribute without a name")
		}
	}
	return nil
}

// alwaysTrue is the condition of a ConditionCheck that has none to check
// (a Check without conditions, an Update with nothing to set): DynamoDB
// requires a ConditionExpression on a ConditionCheck.
const alwaysTrue = "attribute_exists(pk) OR attribute_not_exists(pk)"

// itemAction is w's action: a PutNew is a Put on attribute_not_exists(pk);
// an Update an Update whose SET sets w.Set and appends w.Append, on w.If;
// a Check a ConditionCheck on w.If. An Update with nothing to set or
// append is a ConditionCheck of its conditions: DynamoDB has no empty
// update (unlike memtest, it then makes no empty item where none was).
func (s *Store) itemAction(w core.ItemWrite, traceparent string) (types.TransactWriteItem, error) {
	key := map[string]types.AttributeValue{attrPK: stringAttr(w.Key)}
	switch {
	case w.Op == core.PutNew:
		item := make(map[string]types.AttributeValue, len(w.Set)+12)
		for name, v := range w.Set {
			av, err := toAttr(v)
			if err != nil {
				return types.TransactWriteItem{}, fmt.Errorf("attribute %s: %w", name, err)
			}
			item[name] = av
		}
		item[attrPK] = stringAttr(w.Key)
		if w.Effect != nil {
			addEffect(item, *w.Effect, traceparent)
		}
		return types.TransactWriteItem{Put: &types.Put{TableName: &s.table, Item: item,
			ConditionExpression: aws.String("attribute_not_exists(pk)")}}, nil
	case w.Op == core.Update && len(w.Set)+len(w.Append) > 0:
		var x expr
		var set []string
		for _, name := range slices.Sorted(maps.Keys(w.Set)) {
			av, err := toAttr(w.Set[name])
			if err != nil {
				return types.TransactWriteItem{}, fmt.Errorf("attribute %s: %w", name, err)
			}
			set = append(set, x.name(name)+" = "+x.value(av))
		}
		for _, name := range slices.Sorted(maps.Keys(w.Append)) {
			n := x.name(name)
			one := x.value(&types.AttributeValueMemberL{Value: []types.AttributeValue{stringAttr(w.Append[name])}})
			empty := x.value(&types.AttributeValueMemberL{Value: []types.AttributeValue{}})
			set = append(set, n+" = list_append(if_not_exists("+n+", "+empty+"), "+one+")")
		}
		cond, err := x.conds(w.If)
		if err != nil {
			return types.TransactWriteItem{}, err
		}
		u := &types.Update{TableName: &s.table, Key: key, UpdateExpression: aws.String("SET " + strings.Join(set, ", ")),
			ExpressionAttributeNames: x.names, ExpressionAttributeValues: x.values}
		if cond != "" {
			u.ConditionExpression = &cond
		}
		return types.TransactWriteItem{Update: u}, nil
	default: // a Check, or an Update with nothing to write
		var x expr
		cond, err := x.conds(w.If)
		if err != nil {
			return types.TransactWriteItem{}, err
		}
		if cond == "" {
			cond = alwaysTrue
		}
		return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: &s.table, Key: key,
			ConditionExpression: &cond, ExpressionAttributeNames: x.names, ExpressionAttributeValues: x.values}}, nil
	}
}

// expr collects an expression's attribute names and values under
// placeholders of its own (#n0, :v0, ...), so that any attribute name,
// reserved word or not, can be written. Its maps stay nil while empty:
// DynamoDB refuses an empty map.
type expr struct {
	names  map[string]string
	values map[string]types.AttributeValue
}

func (x *expr) name(attr string) string {
	for k, v := range x.names {
		if v == attr {
			return k
		}
	}
	k := "#n" + strconv.Itoa(len(x.names))
	x.names = withEntry(x.names, k, attr)
	return k
}

func (x *expr) value(av types.AttributeValue) string {
	k := ":v" + strconv.Itoa(len(x.values))
	x.values = withEntry(x.values, k, av)
	return k
}

// conds is the ConditionExpression of cs, all of which must hold ("" for
// none): Exists is attribute_exists(pk); Equals #a = :v; EqualsOrAbsent
// (attribute_not_exists(#a) OR #a = :v); SizeBelow
// (attribute_not_exists(#a) OR size(#a) < :n), as core.Cond.Holds reads
// them.
func (x *expr) conds(cs []core.Cond) (string, error) {
	parts := make([]string, 0, len(cs))
	for _, c := range cs {
		switch c.Op {
		case core.Exists:
			parts = append(parts, "attribute_exists(pk)")
		case core.Equals, core.EqualsOrAbsent:
			av, err := condValue(c.Value)
			if err != nil {
				return "", fmt.Errorf("condition on %s: %w", c.Attr, err)
			}
			a := x.name(c.Attr)
			p := a + " = " + x.value(av)
			if c.Op == core.EqualsOrAbsent {
				p = "(attribute_not_exists(" + a + ") OR " + p + ")"
			}
			parts = append(parts, p)
		case core.SizeBelow:
			n, _ := c.Value.(int) // core.CheckItemWrites made sure it is an int
			a := x.name(c.Attr)
			parts = append(parts, "(attribute_not_exists("+a+") OR size("+a+") < "+x.value(numberAttr(int64(n)))+")")
		default:
			return "", fmt.Errorf("condition op %d", c.Op)
		}
	}
	return strings.Join(parts, " AND "), nil
}

// condValue is the value an Equals compares with: a string, an int64 or a
// bool (core.Cond.Holds never finds a list equal).
func condValue(v any) (types.AttributeValue, error) {
	if _, list := v.([]string); list {
		return nil, errors.New("a list compares equal to nothing")
	}
	return toAttr(v)
}

// toAttr is a value of core.Item as an attribute value.
func toAttr(v any) (types.AttributeValue, error) {
	switch v := v.(type) {
	case string:
		return stringAttr(v), nil
	case int64:
		return numberAttr(v), nil
	case bool:
		return &types.AttributeValueMemberBOOL{Value: v}, nil
	case []string:
		l := make([]types.AttributeValue, len(v))
		for i, s := range v {
			l[i] = stringAttr(s)
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	}
	return nil, fmt.Errorf("a %T; the store keeps string, int64, bool and []string", v)
}

// fromAttr is an attribute value as the Go value toAttr made it from.
func fromAttr(av types.AttributeValue) (any, error) {
	switch av := av.(type) {
	case *types.AttributeValueMemberS:
		return av.Value, nil
	case *types.AttributeValueMemberN:
		return strconv.ParseInt(av.Value, 10, 64)
	case *types.AttributeValueMemberBOOL:
		return av.Value, nil
	case *types.AttributeValueMemberL:
		l := make([]string, len(av.Value))
		for i, e := range av.Value {
			s, ok := e.(*types.AttributeValueMemberS)
			if !ok {
				return nil, fmt.Errorf("a list element of type %T", e)
			}
			l[i] = s.Value
		}
		return l, nil
	}
	return nil, fmt.Errorf("a value of type %T", av)
}

// itemAttrs are item's attributes but the store's own and those skip
// names, as core.Item; nil when there are none.
func itemAttrs(item map[string]types.AttributeValue, skip map[string]bool) (core.Item, error) {
	var out core.Item
	for name, av := range item {
		if storeAttrs[name] || skip[name] {
			continue
		}
		v, err := fromAttr(av)
		if err != nil {
			return nil, fmt.Errorf("dynamo: item %s attribute %s: %w", pkOf(item), name, err)
		}
		if out == nil {
			out = core.Item{}
		}
		out[name] = v
	}
	return out, nil
}

// ticketAttrs are a ticket item's attributes beyond its typed fields and
// its delivery record (core.Ticket.Attrs).
func ticketAttrs(item map[string]types.AttributeValue) (core.Item, error) {
	return itemAttrs(item, ticketFields)
}

// pkOf is item's pk, "" when it has none.
func pkOf(item map[string]types.AttributeValue) string {
	pk, _ := item[attrPK].(*types.AttributeValueMemberS)
	if pk == nil {
		return ""
	}
	return pk.Value
}

// storedItem is item as Items returns it: a ticket's typed tenant_id and
// user_id beside its Attrs, any other item's attributes, and the delivery
// when it has one.
func storedItem(key string, item map[string]types.AttributeValue) (core.StoredItem, error) {
	skip := map[string]bool(nil)
	if strings.HasPrefix(key, core.TicketKeyPrefix) {
		skip = map[string]bool{"operation_key": true, "arguments": true, "created_at": true}
	}
	attrs, err := itemAttrs(item, skip)
	if err != nil {
		return core.StoredItem{}, err
	}
	if attrs == nil {
		attrs = core.Item{}
	}
	return core.StoredItem{Key: key, Attrs: attrs, Delivery: parseCoreDelivery(item)}, nil
}

// batchGetMax is how many keys one BatchGetItem takes.
const batchGetMax = 100

// unprocessedRetries bounds the BatchGetItem requests sent again for the
// keys DynamoDB left unprocessed (it does so under throttling); past it
// the read answers busy.
const unprocessedRetries = 8

// Items implements core.Store with strongly consistent BatchGetItem
// requests (ConsistentRead), up to batchGetMax distinct keys each; the
// keys DynamoDB leaves unprocessed are asked for again, with a short
// backoff. The answer follows keys' order, absent keys left out.
func (s *Store) Items(ctx context.Context, keys []string) ([]core.StoredItem, error) {
	distinct := make([]string, 0, len(keys))
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			distinct = append(distinct, k)
		}
	}
	found := make(map[string]map[string]types.AttributeValue, len(distinct))
	for chunk := range slices.Chunk(distinct, batchGetMax) {
		if err := s.batchGet(ctx, chunk, found); err != nil {
			return nil, err
		}
	}
	out := make([]core.StoredItem, 0, len(found))
	for _, k := range keys {
		item, ok := found[k]
		if !ok {
			continue
		}
		si, err := storedItem(k, item)
		if err != nil {
			return nil, err
		}
		out = append(out, si)
	}
	return out, nil
}

// batchGet reads the items of keys (distinct, at most batchGetMax) into
// found by pk.
func (s *Store) batchGet(ctx context.Context, keys []string, found map[string]map[string]types.AttributeValue) error {
	ka := types.KeysAndAttributes{ConsistentRead: aws.Bool(true)}
	for _, k := range keys {
		ka.Keys = append(ka.Keys, map[string]types.AttributeValue{attrPK: stringAttr(k)})
	}
	backoff := 20 * time.Millisecond
	for attempt := 0; ; attempt++ {
		var out *dynamodb.BatchGetItemOutput
		err := s.call(ctx, func(ctx context.Context) (err error) {
			out, err = s.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
				RequestItems: map[string]types.KeysAndAttributes{s.table: ka},
			})
			return err
		})
		if err != nil {
			return err
		}
		for _, item := range out.Responses[s.table] {
			found[pkOf(item)] = item
		}
		left, ok := out.UnprocessedKeys[s.table]
		if !ok || len(left.Keys) == 0 {
			return nil
		}
		if attempt == unprocessedRetries {
			return fmt.Errorf("%w: dynamo: %d keys unprocessed after %d BatchGetItem requests", idem.ErrBusy, len(left.Keys), attempt+1)
		}
		ka = left
		ka.ConsistentRead = aws.Bool(true)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", idem.ErrBusy, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

var _ delivery.Sequencer = (*Store)(nil)

// Neighbours implements delivery.Sequencer with strongly consistent
// GetItems: of an effect's item for the ticket it follows
// (delivery_ticket), then of that ticket's item for its follow-ups
// (core.AttrFollowUps). A ticket's id is its own ticket: one read.
func (s *Store) Neighbours(ctx context.Context, id string) (ticket, before, after string, err error) {
	ticket = id
	if delivery.IsEffect(id) {
		key, ok := outboxKey(id)
		if !ok {
			return "", "", "", delivery.ErrNoRecord
		}
		item, err := s.getAttrs(ctx, key, attrEffectKind, attrEffectTicket)
		if err != nil {
			return "", "", "", err
		}
		if _, isEffect := item[attrEffectKind]; !isEffect {
			return "", "", "", delivery.ErrNoRecord
		}
		ticket, _ = (&itemReader{item: item}).optStr(attrEffectTicket)
	}
	if ticket == "" {
		return "", "", "", nil
	}
	item, err := s.getAttrs(ctx, ticketKey(ticket), core.AttrFollowUps)
	if err != nil {
		return "", "", "", err
	}
	var followUps []string
	if av, ok := item[core.AttrFollowUps]; ok {
		v, err := fromAttr(av)
		if followUps, ok = v.([]string); err != nil || !ok {
			return "", "", "", fmt.Errorf("dynamo: ticket %s: %s is not a list of strings", ticket, core.AttrFollowUps)
		}
	}
	before, after = delivery.Neighbours(ticket, followUps, id)
	return ticket, before, after, nil
}

// getAttrs reads the attributes attrs of the item of key with a strongly
// consistent GetItem; an absent item reads as an empty map.
func (s *Store) getAttrs(ctx context.Context, key map[string]types.AttributeValue, attrs ...string) (map[string]types.AttributeValue, error) {
	var x expr
	proj := make([]string, len(attrs))
	for i, a := range attrs {
		proj[i] = x.name(a)
	}
	var out *dynamodb.GetItemOutput
	err := s.call(ctx, func(ctx context.Context) (err error) {
		out, err = s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: key, ConsistentRead: aws.Bool(true),
			ProjectionExpression: aws.String(strings.Join(proj, ", ")), ExpressionAttributeNames: x.names})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out.Item, nil
}

// Wake implements delivery.Sequencer with one UpdateItem of the due time,
// conditional on what delivery.Wakeable reads (pending; no send, lookup
// or unknown send recorded, absent counts and flags being zero) and on a
// due time after now; a failed condition (or no such record) changes
// nothing and is no error.
func (s *Store) Wake(ctx context.Context, id string, now time.Time) error {
	key, ok := outboxKey(id)
	if !ok {
		return nil
	}
	err := s.call(ctx, func(ctx context.Context) error {
		_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:        &s.table,
			Key:              key,
			UpdateExpression: aws.String("SET #due = :now"),
			ConditionExpression: aws.String("#state = :pending AND #due > :now" +
				" AND (attribute_not_exists(#attempts) OR #attempts = :zero)" +
				" AND (attribute_not_exists(#lookups) OR #lookups = :zero)" +
				" AND (attribute_not_exists(#unknown) OR #unknown = :false)"),
			ExpressionAttributeNames: map[string]string{"#due": attrDueAt, "#state": attrState,
				"#attempts": attrAttempts, "#lookups": attrLookupFailures, "#unknown": attrSentUnknown},
			ExpressionAttributeValues: map[string]types.AttributeValue{":now": numberAttr(now.Unix()),
				":pending": stringAttr(string(delivery.StatePending)), ":zero": numberAttr(0),
				":false": &types.AttributeValueMemberBOOL{Value: false}},
		})
		return err
	})
	if conditionFailed(err) {
		return nil
	}
	return err
}
