package dynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
)

var _ delivery.Outbox = (*Store)(nil)

// parseDelivery reads the delivery record of a ticket's or an effect's
// item: its outbox id (outboxID) and its kind (delivery.KindTicket, or
// the effect's delivery_kind) beside the record.
func parseDelivery(item map[string]types.AttributeValue) (delivery.Record, error) {
	r := itemReader{item: item}
	pk := r.str(attrPK)
	rec := delivery.Record{TicketID: outboxID(pk), Kind: delivery.KindTicket}
	if !strings.HasPrefix(pk, prefixTicket) {
		rec.Kind = r.str(attrEffectKind)
	}
	rec.State = delivery.State(r.str(attrState))
	optNum := func(name string) int64 {
		if _, ok := item[name]; ok {
			return r.num(name)
		}
		return 0
	}
	rec.Attempts = int(optNum(attrAttempts))
	rec.LookupFailures = int(optNum(attrLookupFailures))
	if b, ok := item[attrSentUnknown].(*types.AttributeValueMemberBOOL); ok {
		rec.SentUnknown = b.Value
	}
	if _, ok := item[attrSentAt]; ok {
		rec.SentAt = time.UnixMilli(r.num(attrSentAt))
	}
	if _, ok := item[attrDueAt]; ok {
		rec.DueAt = time.Unix(r.num(attrDueAt), 0)
	}
	if _, ok := item[attrLeaseUntil]; ok {
		rec.LeaseUntil = time.Unix(r.num(attrLeaseUntil), 0)
	}
	rec.LeaseOwner, _ = r.optStr(attrLeaseOwner)
	rec.Traceparent, _ = r.optStr(attrTraceparent)
	rec.Error, _ = r.optStr(attrError)
	rec.ExternalID, _ = r.optStr(attrExternalID)
	rec.ExternalURL, _ = r.optStr(attrExternalURL)
	if _, ok := item[attrDeliveredAt]; ok {
		rec.DeliveredAt = r.time(attrDeliveredAt)
	}
	if r.err == nil && !rec.State.Valid() {
		r.err = fmt.Errorf("dynamo: outbox record %s has delivery state %q", rec.TicketID, rec.State)
	}
	return rec, r.err
}

func ticketKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: stringAttr(prefixTicket + id)}
}

// conditionFailed reports whether err is a failed ConditionExpression.
func conditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// Delivery implements delivery.Outbox with one strongly consistent read
// of the record's item (a ticket's, or an effect's: outboxKey).
func (st *Store) Delivery(ctx context.Context, id string) (delivery.Record, error) {
	key, ok := outboxKey(id)
	if !ok {
		return delivery.Record{}, delivery.ErrNoRecord
	}
	var out *dynamodb.GetItemOutput
	err := st.call(ctx, func(ctx context.Context) (err error) {
		out, err = st.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &st.table, Key: key, ConsistentRead: aws.Bool(true)})
		return err
	})
	if err != nil {
		return delivery.Record{}, err
	}
	if _, ok := out.Item[attrState]; !ok {
		return delivery.Record{}, delivery.ErrNoRecord
	}
	rec, err := parseDelivery(out.Item)
	if av, ok := out.Item[core.AttrFollowUps]; ok && err == nil && !delivery.IsEffect(id) {
		// What follows a ticket, from the same read.
		v, ferr := fromAttr(av)
		rec.FollowUps, _ = v.([]string)
		err = ferr
	}
	return rec, err
}

// Due implements delivery.Outbox with one Query on DeliveryDueIndex, which
// holds tickets' and effects' live records alike: each entry's outbox id
// (outboxID). The index is eventually consistent: a record just claimed
// may still show, and Claim then refuses it.
func (st *Store) Due(ctx context.Context, now time.Time, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	out, err := st.queryShard(ctx, " AND #due <= :now", dynamodb.QueryInput{
		ExpressionAttributeNames:  map[string]string{"#due": attrDueAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": numberAttr(now.Unix())},
		Limit:                     aws.Int32(int32(min(limit, 1000))),
	})
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(out.Items))
	for _, item := range out.Items {
		pk := pkOf(item)
		if id := outboxID(pk); id != "" {
			ids = append(ids, id)
		} else {
			return nil, fmt.Errorf("dynamo: %s entry without a key", DeliveryDueIndex)
		}
	}
	return ids, nil
}

// queryShard runs one Query of DeliveryDueIndex in the outbox's shard:
// in with the table, the index and the key condition "#shard = :shard"
// followed by more, whose names and values in carries.
func (st *Store) queryShard(ctx context.Context, more string, in dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
	in.TableName = &st.table
	in.IndexName = aws.String(DeliveryDueIndex)
	in.KeyConditionExpression = aws.String("#shard = :shard" + more)
	in.ExpressionAttributeNames = withEntry(in.ExpressionAttributeNames, "#shard", attrShard)
	in.ExpressionAttributeValues = withEntry(in.ExpressionAttributeValues, ":shard", stringAttr(shard))
	var out *dynamodb.QueryOutput
	err := st.call(ctx, func(ctx context.Context) (err error) {
		out, err = st.client.Query(ctx, &in)
		return err
	})
	return out, err
}

// withEntry is m, made where nil, with k set to v.
func withEntry[V any](m map[string]V, k string, v V) map[string]V {
	if m == nil {
		m = make(map[string]V, 1)
	}
	m[k] = v
	return m
}

var _ delivery.WaitingCounter = (*Store)(nil)

// Waiting implements delivery.WaitingCounter with a Query on
// DeliveryDueIndex that counts (Select COUNT) instead of returning items:
// the index holds exactly the live deliveries, keys only, so one page
// counts thousands of them; further pages are read until the end. The
// index is eventually consistent, which a gauge can afford. The scheduled
// sweep counts once per run; the stream never does.
func (st *Store) Waiting(ctx context.Context) (int, error) {
	total := 0
	var start map[string]types.AttributeValue
	for {
		out, err := st.queryShard(ctx, "", dynamodb.QueryInput{Select: types.SelectCount, ExclusiveStartKey: start})
		if err != nil {
			return 0, err
		}
		total += int(out.Count)
		if start = out.LastEvaluatedKey; len(start) == 0 {
			return total, nil
		}
	}
}

// Claim implements delivery.Outbox with one conditional UpdateItem, which
// returns the item as it was (the ticket or the effect to send, and the
// record before). A claimed item that cannot be parsed stays claimed and
// is returned with delivery.ErrUnreadable.
func (st *Store) Claim(ctx context.Context, id, owner string, now, leaseUntil time.Time) (delivery.Claimed, error) {
	key, ok := outboxKey(id)
	if !ok {
		return delivery.Claimed{}, delivery.ErrNotClaimable
	}
	var out *dynamodb.UpdateItemOutput
	err := st.call(ctx, func(ctx context.Context) (err error) {
		out, err = st.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:        &st.table,
			Key:              key,
			UpdateExpression: aws.String("SET #state = :delivering, #owner = :owner, #lease = :lease, #due = :due"),
			ConditionExpression: aws.String("(#state = :pending AND #due <= :now) OR " +
				"(#state = :delivering AND #lease < :now)"),
			ExpressionAttributeNames: map[string]string{
				"#state": attrState, "#owner": attrLeaseOwner, "#lease": attrLeaseUntil, "#due": attrDueAt,
			},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":delivering": stringAttr(string(delivery.StateDelivering)), ":pending": stringAttr(string(delivery.StatePending)),
				":owner": stringAttr(owner), ":lease": numberAttr(leaseUntil.Unix()), ":due": numberAttr(leaseUntil.Unix() + 1),
				":now": numberAttr(now.Unix()),
			},
			ReturnValues: types.ReturnValueAllOld,
		})
		return err
	})
	if conditionFailed(err) {
		return delivery.Claimed{}, delivery.ErrNotClaimable
	}
	if err != nil {
		return delivery.Claimed{}, err
	}
	// The claim holds from here: an item that cannot be read is returned
	// as unreadable, for the engine to record failed, rather than left
	// delivering for every takeover to hit the same error.
	before, err := parseDelivery(out.Attributes)
	if delivery.IsEffect(id) {
		var e *delivery.Effect
		if err == nil {
			e, err = claimedEffect(out.Attributes)
		}
		c := delivery.Claimed{Ticket: delivery.HelpdeskTicket{ID: id}, Effect: e, Before: before}
		if err != nil {
			return c, delivery.Unreadable(id, err)
		}
		return c, nil
	}
	var ticket delivery.HelpdeskTicket
	if err == nil {
		ticket, err = claimedTicket(out.Attributes)
	}
	if err != nil {
		return delivery.Claimed{Ticket: delivery.HelpdeskTicket{ID: id}, Before: before}, delivery.Unreadable(id, err)
	}
	return delivery.Claimed{Ticket: ticket, Before: before}, nil
}

// claimedEffect reads the effect a destination receives from a claimed
// effect's item (addEffect).
func claimedEffect(item map[string]types.AttributeValue) (*delivery.Effect, error) {
	r := itemReader{item: item}
	e := &delivery.Effect{Kind: r.str(attrEffectKind), ID: r.str(attrEffectKey), Payload: []byte(r.str(attrEffectPayload))}
	e.TicketID, _ = r.optStr(attrEffectTicket)
	if r.err != nil {
		return nil, r.err
	}
	return e, nil
}

// claimedTicket reads the ticket a destination receives from a claimed item.
func claimedTicket(item map[string]types.AttributeValue) (delivery.HelpdeskTicket, error) {
	t, err := parseTicket(item)
	if err != nil {
		return delivery.HelpdeskTicket{}, err
	}
	return delivery.NewTicket(t)
}

// Record implements delivery.Outbox with one UpdateItem conditional on the
// lease owner. A final state takes the ticket out of DeliveryDueIndex.
func (st *Store) Record(ctx context.Context, id, owner string, u delivery.Update) error {
	w := newUpdate(u)
	w.names["#owner"] = attrLeaseOwner
	w.values[":delivering"] = stringAttr(string(delivery.StateDelivering))
	w.values[":owner"] = stringAttr(owner)
	err := st.writeUpdate(ctx, id, w, "#state = :delivering AND #owner = :owner")
	if conditionFailed(err) {
		return delivery.ErrLeaseLost
	}
	return err
}

// update is an UpdateItem's expression and its names and values.
type update struct {
	expr   string
	names  map[string]string
	values map[string]types.AttributeValue
}

// newUpdate builds the expression that writes u and drops the lease. A
// pending update puts the ticket (back) in DeliveryDueIndex; any other
// takes it out.
func newUpdate(u delivery.Update) update {
	names := map[string]string{"#state": attrState, "#owner": attrLeaseOwner}
	values := map[string]types.AttributeValue{":state": stringAttr(string(u.State))}
	var set, remove []string
	put := func(attr string, v types.AttributeValue) {
		k := strconv.Itoa(len(names))
		names["#a"+k], values[":v"+k] = attr, v
		set = append(set, "#a"+k+" = :v"+k)
	}
	drop := func(attr string) {
		k := strconv.Itoa(len(names))
		names["#a"+k] = attr
		remove = append(remove, "#a"+k)
	}
	optional := func(attr, v string) {
		if v == "" {
			drop(attr)
		} else {
			put(attr, stringAttr(v))
		}
	}
	set = append(set, "#state = :state")
	put(attrAttempts, numberAttr(int64(u.Attempts)))
	put(attrLookupFailures, numberAttr(int64(u.LookupFailures)))
	put(attrSentUnknown, &types.AttributeValueMemberBOOL{Value: u.SentUnknown})
	if u.SentAt.IsZero() {
		drop(attrSentAt)
	} else {
		put(attrSentAt, numberAttr(u.SentAt.UnixMilli()))
	}
	optional(attrError, u.Error)
	optional(attrExternalID, u.ExternalID)
	optional(attrExternalURL, u.ExternalURL)
	if u.State == delivery.StateDelivered {
		put(attrDeliveredAt, stringAttr(u.DeliveredAt.UTC().Format(time.RFC3339Nano)))
	} else {
		drop(attrDeliveredAt)
	}
	if u.State == delivery.StatePending {
		put(attrDueAt, numberAttr(u.DueAt.Unix()))
		put(attrShard, stringAttr(shard))
	} else {
		drop(attrDueAt)
		drop(attrShard)
	}
	remove = append(remove, "#owner")
	drop(attrLeaseUntil)
	return update{expr: "SET " + strings.Join(set, ", ") + " REMOVE " + strings.Join(remove, ", "), names: names, values: values}
}

// writeUpdate writes w on the item of the outbox id under cond; an id
// that names no outbox record's item fails as a failed condition would.
func (st *Store) writeUpdate(ctx context.Context, id string, w update, cond string) error {
	key, ok := outboxKey(id)
	if !ok {
		return &types.ConditionalCheckFailedException{Message: aws.String("dynamo: " + id + " names no outbox record")}
	}
	return st.call(ctx, func(ctx context.Context) error {
		_, err := st.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 &st.table,
			Key:                       key,
			UpdateExpression:          aws.String(w.expr),
			ConditionExpression:       aws.String(cond),
			ExpressionAttributeNames:  w.names,
			ExpressionAttributeValues: w.values,
		})
		return err
	})
}

var _ delivery.Admin = (*Store)(nil)

// List implements delivery.Admin with a Scan filtered on the state: the
// final states are not indexed (DeliveryDueIndex holds live tickets, keys
// only), and this is an operator's command run by hand, so it reads the
// whole table once, page by page. Ordered by ticket id.
func (st *Store) List(ctx context.Context, state delivery.State, limit int) ([]delivery.Record, error) {
	if limit <= 0 {
		return nil, nil
	}
	var out []delivery.Record
	var start map[string]types.AttributeValue
	for {
		var page *dynamodb.ScanOutput
		err := st.call(ctx, func(ctx context.Context) (err error) {
			page, err = st.client.Scan(ctx, &dynamodb.ScanInput{
				TableName: &st.table, FilterExpression: aws.String("#state = :state"),
				ExpressionAttributeNames:  map[string]string{"#state": attrState},
				ExpressionAttributeValues: map[string]types.AttributeValue{":state": stringAttr(string(state))},
				ExclusiveStartKey:         start, ConsistentRead: aws.Bool(true),
			})
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, item := range page.Items {
			r, err := parseDelivery(item)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		if start = page.LastEvaluatedKey; len(start) == 0 {
			break
		}
	}
	slices.SortFunc(out, func(a, b delivery.Record) int { return strings.Compare(a.TicketID, b.TicketID) })
	return out[:min(limit, len(out))], nil
}

// Settle implements delivery.Admin with one UpdateItem conditional on the
// record read (state, counts, "may be in the helpdesk" and send start; a
// count of zero or a flag unset may be absent, as a send start that is
// none is); when the condition fails, a consistent read says why.
func (st *Store) Settle(ctx context.Context, id string, read delivery.Record, u delivery.Update) error {
	w := newUpdate(u)
	cond := []string{"#state = :from"}
	w.values[":from"] = stringAttr(string(read.State))
	same := func(attr string, v types.AttributeValue, absentIsZero bool) {
		k := strconv.Itoa(len(w.names))
		w.names["#c"+k], w.values[":c"+k] = attr, v
		c := "#c" + k + " = :c" + k
		if absentIsZero {
			c = "(attribute_not_exists(#c" + k + ") OR " + c + ")"
		}
		cond = append(cond, c)
	}
	same(attrAttempts, numberAttr(int64(read.Attempts)), read.Attempts == 0)
	same(attrLookupFailures, numberAttr(int64(read.LookupFailures)), read.LookupFailures == 0)
	same(attrSentUnknown, &types.AttributeValueMemberBOOL{Value: read.SentUnknown}, !read.SentUnknown)
	if read.SentAt.IsZero() {
		k := strconv.Itoa(len(w.names))
		w.names["#c"+k] = attrSentAt
		cond = append(cond, "attribute_not_exists(#c"+k+")")
	} else {
		same(attrSentAt, numberAttr(read.SentAt.UnixMilli()), false)
	}
	err := st.writeUpdate(ctx, id, w, strings.Join(cond, " AND "))
	if !conditionFailed(err) {
		return err
	}
	r, err := st.Delivery(ctx, id)
	if err != nil {
		return err
	}
	return delivery.Refusal(id, r, read)
}
