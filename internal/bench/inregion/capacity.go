package inregion

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"strings"
)

// Capacity is read and write capacity units.
type Capacity struct {
	RCU, WCU float64
}

func (c Capacity) add(d Capacity) Capacity { return Capacity{RCU: c.RCU + d.RCU, WCU: c.WCU + d.WCU} }

// Capacity units, as AWS bills them (Amazon DynamoDB Developer Guide, "Item
// sizes and capacity unit consumption" and "Capacity management for
// transactions"):
//   - a write consumes 1 WCU per KB of the item, rounded up; a failed
//     conditional write still consumes: the existing item's size, or 1 WCU
//     when there is none;
//   - a strongly consistent read consumes 1 RCU per 4 KB, rounded up (half
//     for an eventually consistent one), and a read of a missing item
//     still 1 (0.5);
//   - a Query rounds the total size of the items it returns, once;
//   - a transaction performs two writes (or reads) of every item, to
//     prepare and to commit: 2 WCU per KB per item.
//
// AWS publishes no rule for a transaction DynamoDB cancels, and real
// DynamoDB returns no ConsumedCapacity with TransactionCanceledException.
// This model charges each of its items as a failed conditional write done
// transactionally: 2 WCU per KB of the existing item (returned by
// ReturnValuesOnConditionCheckFailure ALL_OLD when the caller asks) or 2
// when there is none. A cancelled transaction is therefore never free here.
const (
	writeUnit = 1024
	readUnit  = 4096
)

// reported is the ConsumedCapacity of a response, when the request asked
// for it and DynamoDB returned it.
func reported(operation string, resp []byte) (Capacity, bool) {
	var body struct {
		ConsumedCapacity json.RawMessage
	}
	if json.Unmarshal(resp, &body) != nil || len(body.ConsumedCapacity) == 0 || string(body.ConsumedCapacity) == "null" {
		return Capacity{}, false
	}
	type units struct {
		CapacityUnits, ReadCapacityUnits, WriteCapacityUnits *float64
	}
	var list []units
	if body.ConsumedCapacity[0] == '[' {
		if json.Unmarshal(body.ConsumedCapacity, &list) != nil {
			return Capacity{}, false
		}
	} else {
		var one units
		if json.Unmarshal(body.ConsumedCapacity, &one) != nil {
			return Capacity{}, false
		}
		list = []units{one}
	}
	var c Capacity
	for _, u := range list {
		switch {
		case u.ReadCapacityUnits != nil || u.WriteCapacityUnits != nil:
			c = c.add(Capacity{RCU: deref(u.ReadCapacityUnits), WCU: deref(u.WriteCapacityUnits)})
		case u.CapacityUnits != nil && isRead(operation):
			c.RCU += *u.CapacityUnits
		case u.CapacityUnits != nil:
			c.WCU += *u.CapacityUnits
		}
	}
	return c, true
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

func isRead(operation string) bool {
	switch operation {
	case "GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems":
		return true
	}
	return false
}

// item is an item in DynamoDB's JSON: attribute name → typed value.
type item map[string]map[string]json.RawMessage

// computed is the capacity the request consumed by the rules above, from
// the request and DynamoDB's answer; ok is false for an operation whose
// consumption this package does not compute (table management, Scan,
// batches). cancelled says DynamoDB answered TransactionCanceledException,
// conditionFailed ConditionalCheckFailedException.
func computed(operation string, req, resp []byte, status int, cancelled, conditionFailed bool) (Capacity, bool) {
	failed := status != 200 && !cancelled && !conditionFailed // throttled or refused: nothing done
	switch operation {
	case "GetItem":
		var in struct{ ConsistentRead bool }
		var out struct{ Item item }
		_ = json.Unmarshal(req, &in)
		_ = json.Unmarshal(resp, &out)
		if failed {
			return Capacity{}, true
		}
		return Capacity{RCU: readUnits(itemSize(out.Item), in.ConsistentRead)}, true
	case "Query":
		var in struct{ ConsistentRead bool }
		var out struct{ Items []item }
		_ = json.Unmarshal(req, &in)
		_ = json.Unmarshal(resp, &out)
		if failed {
			return Capacity{}, true
		}
		total := 0
		for _, it := range out.Items {
			total += itemSize(it)
		}
		return Capacity{RCU: readUnits(total, in.ConsistentRead)}, true
	case "PutItem", "UpdateItem", "DeleteItem":
		if failed {
			return Capacity{}, true
		}
		var in struct {
			Item                      item
			Key                       item
			ExpressionAttributeValues item
		}
		var out struct {
			Attributes item // UpdateItem's new or old image, when asked for
			Item       item // the existing item of a failed condition, when asked for
		}
		_ = json.Unmarshal(req, &in)
		_ = json.Unmarshal(resp, &out)
		if conditionFailed {
			return Capacity{WCU: writeUnits(itemSize(out.Item))}, true
		}
		size := itemSize(in.Item)
		if operation != "PutItem" {
			// The key and the values set are a lower bound of the item
			// after the update; the image returned, when asked for, is
			// the item itself.
			size = max(itemSize(in.Key)+itemSize(in.ExpressionAttributeValues), itemSize(out.Attributes))
		}
		return Capacity{WCU: writeUnits(size)}, true
	case "TransactWriteItems":
		if failed {
			return Capacity{}, true
		}
		var in struct {
			TransactItems []map[string]struct {
				Item                      item
				Key                       item
				ExpressionAttributeValues item
			}
		}
		var out struct {
			CancellationReasons []struct{ Item item }
		}
		_ = json.Unmarshal(req, &in)
		_ = json.Unmarshal(resp, &out)
		var c Capacity
		for i, action := range in.TransactItems {
			if cancelled {
				var existing item
				if i < len(out.CancellationReasons) {
					existing = out.CancellationReasons[i].Item
				}
				c.WCU += 2 * writeUnits(itemSize(existing))
				continue
			}
			for kind, a := range action {
				size := itemSize(a.Item)
				if kind != "Put" {
					size = itemSize(a.Key) + itemSize(a.ExpressionAttributeValues)
				}
				c.WCU += 2 * writeUnits(size)
			}
		}
		return c, true
	case "TransactGetItems":
		if failed || cancelled {
			return Capacity{}, true
		}
		var out struct{ Responses []struct{ Item item } }
		_ = json.Unmarshal(resp, &out)
		var in struct{ TransactItems []json.RawMessage }
		_ = json.Unmarshal(req, &in)
		var c Capacity
		for i := range in.TransactItems {
			var it item
			if i < len(out.Responses) {
				it = out.Responses[i].Item
			}
			c.RCU += 2 * readUnits(itemSize(it), true)
		}
		return c, true
	}
	return Capacity{}, false
}

// writeUnits is the WCU of writing an item of size bytes: 1 per KB,
// rounded up, at least 1.
func writeUnits(size int) float64 { return max(1, math.Ceil(float64(size)/writeUnit)) }

// readUnits is the RCU of reading size bytes: 1 per 4 KB, rounded up, at
// least 1; half that for an eventually consistent read.
func readUnits(size int, consistent bool) float64 {
	u := max(1, math.Ceil(float64(size)/readUnit))
	if !consistent {
		u /= 2
	}
	return u
}

// itemSize is the size of an item by AWS's rules: the lengths of its
// attribute names and values.
func itemSize(it item) int {
	n := 0
	for name, v := range it {
		n += len(name) + valueSize(v)
	}
	return n
}

// valueSize is the size of one attribute value: a string's UTF-8 bytes, a
// binary's raw bytes, a number's significant digits halved plus one, 1 for
// a Boolean or null, 3 plus the elements for a list or map, the elements
// for a set.
func valueSize(v map[string]json.RawMessage) int {
	for typ, raw := range v {
		switch typ {
		case "S":
			var s string
			_ = json.Unmarshal(raw, &s)
			return len(s)
		case "N":
			var s string
			_ = json.Unmarshal(raw, &s)
			return numberSize(s)
		case "B":
			var s string
			_ = json.Unmarshal(raw, &s)
			b, _ := base64.StdEncoding.DecodeString(s)
			return len(b)
		case "BOOL", "NULL":
			return 1
		case "SS", "NS", "BS":
			var ss []string
			_ = json.Unmarshal(raw, &ss)
			n := 0
			for _, s := range ss {
				switch typ {
				case "SS":
					n += len(s)
				case "NS":
					n += numberSize(s)
				default:
					b, _ := base64.StdEncoding.DecodeString(s)
					n += len(b)
				}
			}
			return n
		case "L":
			var l []map[string]json.RawMessage
			_ = json.Unmarshal(raw, &l)
			n := 3
			for _, e := range l {
				n += valueSize(e)
			}
			return n
		case "M":
			var m item
			_ = json.Unmarshal(raw, &m)
			return 3 + itemSize(m)
		}
	}
	return 0
}

// numberSize is 1 byte per two significant digits, plus 1; leading and
// trailing zeros are not significant.
func numberSize(s string) int {
	mant, _, _ := strings.Cut(strings.ToLower(s), "e")
	digits := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, mant)
	digits = strings.Trim(digits, "0")
	return (len(digits)+1)/2 + 1
}
