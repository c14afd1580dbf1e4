package inregion

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Proxy forwards DynamoDB requests to an endpoint (DynamoDB Local) and, with
// a model, delays each one: it draws one quantile per request, waits half
// the operation's latency at that quantile before forwarding (the way to
// the table) and the rest after DynamoDB Local has answered (the way back),
// choosing the cancelled quantiles when the answer is
// TransactionCanceledException. DynamoDB Local's own time comes on top. It
// identifies the operation by the X-Amz-Target header and counts every
// request, with the capacity it consumed, computed by AWS's billing rules
// (see [Capacity]) from the request and the answer, and compared with the
// ConsumedCapacity DynamoDB Local returned when the request asked for it.
type Proxy struct {
	target *url.URL
	model  *Model // nil: no delay
	client *http.Client

	mu    sync.Mutex
	stats Stats
	spans []Span // one per request counted in stats, in the order counted
}

// Span is one request's time at the proxy: from its arrival to its answer
// being ready, the model's delay, the time slept for it and DynamoDB
// Local's time. An operation's requests in wall time (which overlapped,
// which it waited for) come from their spans.
type Span struct {
	Start, End             time.Time
	Delay, Slept, Upstream time.Duration
}

// Stats is what a proxy counted.
type Stats struct {
	// Requests counts the requests by operation (the X-Amz-Target action).
	Requests map[string]int
	// Cancelled counts the TransactionCanceledException answers;
	// Abandoned the requests whose client had gone (its context ended)
	// by the time the answer was ready. Both are in Requests.
	Cancelled, Abandoned int
	// Capacity is the capacity consumed, by AWS's billing rules (see
	// [Capacity]) for the operations they cover (Computed counts those
	// requests), else as DynamoDB Local reported it, when asked.
	Capacity Capacity
	Computed int
	// Agreed counts the requests whose ConsumedCapacity DynamoDB Local
	// reported and the rules computed alike; Disagreed describes the others:
	// DynamoDB Local does not follow AWS's documented rule for every
	// operation (see TestProxyCountsAndCapacity).
	Agreed    int
	Disagreed []string
	// Delay is the model's delay added to all requests and Slept the time
	// the proxy actually waited for it (timers overshoot on a busy
	// machine); Upstream is the time DynamoDB Local took to answer, as the
	// proxy measured it.
	Delay, Slept, Upstream time.Duration
}

// Total is the number of requests.
func (s Stats) Total() int {
	n := 0
	for _, v := range s.Requests {
		n += v
	}
	return n
}

// Sub is what was counted between before and s.
func (s Stats) Sub(before Stats) Stats {
	d := Stats{Requests: map[string]int{}, Cancelled: s.Cancelled - before.Cancelled, Abandoned: s.Abandoned - before.Abandoned,
		Capacity: Capacity{RCU: s.Capacity.RCU - before.Capacity.RCU, WCU: s.Capacity.WCU - before.Capacity.WCU},
		Computed: s.Computed - before.Computed, Agreed: s.Agreed - before.Agreed,
		Disagreed: s.Disagreed[len(before.Disagreed):], Delay: s.Delay - before.Delay, Slept: s.Slept - before.Slept, Upstream: s.Upstream - before.Upstream}
	for k, v := range s.Requests {
		if n := v - before.Requests[k]; n != 0 {
			d.Requests[k] = n
		}
	}
	return d
}

// Add is s and o counted together: the counts of two spans of requests.
func (s Stats) Add(o Stats) Stats {
	d := Stats{Requests: make(map[string]int, len(s.Requests)), Cancelled: s.Cancelled + o.Cancelled, Abandoned: s.Abandoned + o.Abandoned,
		Capacity: s.Capacity.add(o.Capacity), Computed: s.Computed + o.Computed, Agreed: s.Agreed + o.Agreed,
		Disagreed: append(slices.Clone(s.Disagreed), o.Disagreed...), Delay: s.Delay + o.Delay, Slept: s.Slept + o.Slept, Upstream: s.Upstream + o.Upstream}
	for k, v := range s.Requests {
		d.Requests[k] = v
	}
	for k, v := range o.Requests {
		d.Requests[k] += v
	}
	return d
}

// NewProxy returns a proxy to endpoint (http://host:port); model nil adds
// no delay, so that the same hop measures DynamoDB Local alone.
func NewProxy(endpoint string, model *Model) (*Proxy, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("inregion: endpoint %q: want http://host:port", endpoint)
	}
	t := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}
	return &Proxy{target: u, model: model, client: &http.Client{Transport: t},
		stats: Stats{Requests: map[string]int{}}}, nil
}

// Stats returns a copy of what the proxy has counted so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Disagreed = append([]string(nil), p.stats.Disagreed...)
	s.Requests = make(map[string]int, len(p.stats.Requests))
	for k, v := range p.stats.Requests {
		s.Requests[k] = v
	}
	return s
}

// Spans returns a copy of the spans of the requests counted after the
// first from (a Stats.Total taken earlier).
func (p *Proxy) Spans(from int) []Span {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.spans[min(from, len(p.spans)):])
}

// Operation is the DynamoDB action of an X-Amz-Target header
// ("DynamoDB_20120810.GetItem" → "GetItem").
func Operation(target string) string {
	_, op, ok := strings.Cut(target, ".")
	if !ok || op == "" {
		return "unknown"
	}
	return op
}

// hop-by-hop headers are not forwarded (RFC 9110, section 7.6.1).
var hopByHop = map[string]bool{"Connection": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Transfer-Encoding": true, "Te": true, "Trailer": true, "Upgrade": true}

// ServeHTTP forwards one request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// A request the client abandons once sent is still carried to the
	// table, executed and counted, as DynamoDB would: the server learns
	// that the client has gone only when it answers.
	arrived := time.Now()
	client := r.Context()
	ctx := context.WithoutCancel(client)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "inregion: reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	op := Operation(r.Header.Get("X-Amz-Target"))
	rl, modelled := rule(op)
	var u float64
	var slept, actual time.Duration
	if p.model != nil && modelled {
		u = p.model.drawFor(isTransaction(op))
		slept = rl.Done.At(u) / 2
		t0 := time.Now()
		sleep(slept)
		actual += time.Since(t0)
	}

	// The scheme and host are the configured endpoint's; only the path
	// comes from the request.
	dest := *p.target
	dest.Path, dest.RawQuery = r.URL.Path, r.URL.RawQuery
	out, err := http.NewRequestWithContext(ctx, r.Method, dest.String(), bytes.NewReader(body)) //nolint:gosec // fixed host, see above
	if err != nil {
		http.Error(w, "inregion: "+err.Error(), http.StatusInternalServerError)
		return
	}
	for k, vs := range r.Header {
		if !hopByHop[k] {
			out.Header[k] = vs
		}
	}
	out.Host = r.Host // the host the request was signed for
	start := time.Now()
	resp, err := p.client.Do(out) //nolint:gosec // to the configured endpoint only
	var respBody []byte
	if err == nil {
		respBody, err = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
	}
	upstream := time.Since(start)
	if err != nil {
		p.record(op, nil, nil, 0, Span{Start: arrived, End: time.Now(), Slept: actual, Upstream: upstream}, false, false, client.Err() != nil)
		http.Error(w, "inregion: forwarding to DynamoDB Local: "+err.Error(), http.StatusBadGateway)
		return
	}
	errType := errorType(resp.StatusCode, respBody)
	cancelled := strings.HasSuffix(errType, "TransactionCanceledException")
	conditionFailed := strings.HasSuffix(errType, "ConditionalCheckFailedException")

	delay := slept
	if p.model != nil && modelled {
		q := rl.Done
		if cancelled {
			q = rl.Cancelled
		}
		if total := q.At(u); total > slept {
			// The rest is counted from the time actually waited, so that a
			// timer's overshoot on the way there is not added twice.
			t0 := time.Now()
			sleep(total - actual)
			actual += time.Since(t0)
			delay = total
		}
	}
	p.record(op, body, respBody, resp.StatusCode, Span{Start: arrived, End: time.Now(), Delay: delay, Slept: actual, Upstream: upstream},
		cancelled, conditionFailed, client.Err() != nil)
	for k, vs := range resp.Header {
		if !hopByHop[k] {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(respBody)
}

func (p *Proxy) record(op string, req, resp []byte, status int, span Span, cancelled, conditionFailed, abandoned bool) {
	local, isReported := reported(op, resp)
	var mine Capacity
	canCompute := false
	if status != 0 {
		mine, canCompute = computed(op, req, resp, status, cancelled, conditionFailed)
	}
	c := local
	if canCompute {
		c = mine
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if isReported && canCompute {
		if mine == local {
			p.stats.Agreed++
		} else {
			p.stats.Disagreed = append(p.stats.Disagreed,
				fmt.Sprintf("%s: DynamoDB Local reported %+v, the rules give %+v", op, local, mine))
		}
	}
	p.stats.Requests[op]++
	if cancelled {
		p.stats.Cancelled++
	}
	if abandoned {
		p.stats.Abandoned++
	}
	p.stats.Capacity = p.stats.Capacity.add(c)
	if canCompute {
		p.stats.Computed++
	}
	p.stats.Delay += span.Delay
	p.stats.Slept += span.Slept
	p.stats.Upstream += span.Upstream
	p.spans = append(p.spans, span)
}

// errorType is the __type of a DynamoDB error answer
// ("com.amazonaws.dynamodb.v20120810#TransactionCanceledException"), or "".
func errorType(status int, body []byte) string {
	if status < 400 {
		return ""
	}
	var e struct {
		Type string `json:"__type"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Type
}

// sleep waits d.
func sleep(d time.Duration) {
	if d > 0 {
		time.Sleep(d)
	}
}
