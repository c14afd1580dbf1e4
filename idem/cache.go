package idem

import (
	"container/list"
	"reflect"
	"sync"
	"time"
)

// Cache keeps completed records in process, by operation key, so that a
// repeat landing on a process that has already seen its key is answered
// without a store call. Make one with NewCache and set it as Guard.Cache;
// it is safe for concurrent use.
//
// It holds the record, not an answer: a repeat it holds is judged by
// the Guard like one the store answered, so another owner is still a
// Conflict. It finds a call's record under the call's key or, with the
// call's tenant and arguments, under the key the call has under the other
// policy (OpKey.AltID), as the store does. A record of other arguments
// under the call's key (under PolicyRequest, a Mismatch) is left to the
// store, which answers with the call's own operation when the other
// policy's key holds it. It
// keeps only completed records (after Created or Replayed), never a
// pending one, and an entry never outlives its record: it is dropped once
// the record's ExpiresAt has passed by the Guard's clock (Record.Live). It
// holds at most its size of records, dropping the least recently used.
//
// A Cache answers for one store. It binds to the first Guard that checks
// it or calls with it; another Guard may share it only over the same
// Store, one that compares equal to the first Guard's (the same pointer,
// say: a Guard under another Policy over the same store). Any other Guard
// given it fails Guard.Check and every call. A record written to the
// store by other means (a pending one completed) is seen once the Cache
// does not hold its key.
type Cache struct {
	mu    sync.Mutex
	guard any // the Guard it serves, from its first Check or call
	store any // that Guard's Store then
	max   int
	order *list.List               // of *Record, the most recently used first
	byKey map[string]*list.Element // operation key → its element in order
}

// NewCache returns an empty Cache of at most maxEntries records. A Cache
// of fewer than one entry fails Guard.Check.
func NewCache(maxEntries int) *Cache {
	return &Cache{max: maxEntries, order: list.New(), byKey: map[string]*list.Element{}}
}

// serves binds c to the Guard g over store on first use and reports
// whether c serves g: g itself, or a Guard over a store equal to g's. A
// store whose type cannot be compared (a function) is the same only as
// itself, through its Guard.
func (c *Cache) serves(g, store any) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.guard == nil {
		c.guard, c.store = g, store
	}
	if c.guard == g {
		return true
	}
	comparable := store != nil && reflect.TypeOf(store).Comparable() && reflect.TypeOf(c.store) == reflect.TypeOf(store)
	return comparable && c.store == store
}

// lookup returns the cached record that answers the call whose record is
// call, by the rule a Store follows for call.AltKey (see Store): a record
// under call.Key with the call's tenant and fingerprint answers; failing
// that, one under call.AltKey with the call's tenant and fingerprint (the
// call's operation, claimed under the other policy). A record under
// call.Key of another tenant or other arguments answers only when the
// call names no AltKey: otherwise the store may hold the call's own
// operation under call.AltKey, which would answer first, so the call goes
// to the store.
func (c *Cache) lookup(call Record, now time.Time) (Record, bool) {
	own, ok := c.get(call.Key, now)
	mine := func(r Record) bool { return r.Tenant == call.Tenant && r.Fingerprint == call.Fingerprint }
	if ok && (mine(own) || call.AltKey == "" || call.AltKey == call.Key) {
		return own, true
	}
	if call.AltKey == "" || call.AltKey == call.Key {
		return Record{}, false
	}
	if alt, ok := c.get(call.AltKey, now); ok && mine(alt) {
		return alt, true
	}
	return Record{}, false
}

// get returns a copy of the live record of key, if the cache holds one.
// An expired one is dropped. A nil Cache holds nothing.
func (c *Cache) get(key string, now time.Time) (Record, bool) {
	if c == nil {
		return Record{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return Record{}, false
	}
	rec := e.Value.(*Record)
	if !rec.Live(now) {
		c.order.Remove(e)
		delete(c.byKey, key)
		return Record{}, false
	}
	c.order.MoveToFront(e)
	out := *rec
	out.Result = append([]byte(nil), rec.Result...)
	return out, true
}

// put keeps a copy of rec if it is completed and live at now, dropping
// the least recently used record when full. A nil Cache keeps nothing.
func (c *Cache) put(rec Record, now time.Time) {
	if c == nil || c.max < 1 || rec.State != StateCompleted || len(rec.Result) == 0 || !rec.Live(now) {
		return
	}
	rec.Result = append([]byte(nil), rec.Result...)
	rec.AltKey = "" // an input of Claim, not part of the record
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[rec.Key]; ok {
		*e.Value.(*Record) = rec
		c.order.MoveToFront(e)
		return
	}
	c.byKey[rec.Key] = c.order.PushFront(&rec)
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byKey, last.Value.(*Record).Key)
	}
}
