package deliverytest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
)

// Environment of a worker process started by Kill.
const (
	envKillStage  = "DELIVERYTEST_KILL_STAGE" // before, during or after
	envKillTicket = "DELIVERYTEST_KILL_TICKET"
	envKillURL    = "DELIVERYTEST_KILL_URL"
)

// childLease is the lease of the worker that is killed; the next worker's
// clock is set past it rather than waiting.
const childLease = 10 * time.Second

// Markers a worker process prints on stdout for the parent to kill it at.
const (
	markSending   = "SENDING"   // claimed, about to send
	markRecording = "RECORDING" // the helpdesk answered, about to record
)

// KillMain runs the worker side of Kill when this test binary was started
// as one, then exits (it never returns in that case: the parent kills it);
// otherwise it returns at once. Call it first in TestMain; open opens the
// store the parent named in the environment.
func KillMain(open func() (delivery.Outbox, error)) {
	stage := os.Getenv(envKillStage)
	if stage == "" {
		return
	}
	st, err := open()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dest := &httpDest{url: os.Getenv(envKillURL)}
	if stage == "before" {
		dest.beforeSend = func() { fmt.Println(markSending); select {} }
	}
	eng := &delivery.Engine{Store: &stallingStore{Outbox: st, stall: stage == "after"}, Destination: dest, Lease: childLease}
	_, err = eng.Deliver(context.Background(), os.Getenv(envKillTicket))
	fmt.Fprintf(os.Stderr, "worker was not killed: Deliver returned %v\n", err)
	os.Exit(1)
}

// stallingStore stops before recording, when stall is set, after saying so.
type stallingStore struct {
	delivery.Outbox
	stall bool
}

func (s *stallingStore) Record(ctx context.Context, id, owner string, u delivery.Update) error {
	if s.stall {
		fmt.Println(markRecording)
		select {}
	}
	return s.Outbox.Record(ctx, id, owner, u)
}

// httpDest is a minimal destination over HTTP for the kill test: POST
// creates, GET ?key= looks up. The fake helpdesk keys a create on its
// Idempotency-Key header alone, so the POST has no body. Keep-alives are
// off, so the transport never resends a request on its own.
type httpDest struct {
	url        string
	beforeSend func()
}

var killClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

func (d *httpDest) Send(ctx context.Context, t delivery.HelpdeskTicket) (delivery.Receipt, error) {
	if d.beforeSend != nil {
		d.beforeSend()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, nil)
	if err != nil {
		return delivery.Receipt{}, &delivery.SendError{Failure: delivery.NotCreated, Err: err}
	}
	req.Header.Set("Idempotency-Key", t.ID)
	resp, err := killClient.Do(req)
	if err != nil {
		return delivery.Receipt{}, &delivery.SendError{Failure: delivery.Unknown, Err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return delivery.Receipt{}, &delivery.SendError{Failure: delivery.Unknown, Status: resp.StatusCode, Err: fmt.Errorf("%s", b)}
	}
	return delivery.Receipt{ExternalID: string(b)}, nil
}

func (d *httpDest) Lookup(ctx context.Context, id string) (delivery.Receipt, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.url+"?key="+url.QueryEscape(id), nil)
	if err != nil {
		return delivery.Receipt{}, false, err
	}
	resp, err := killClient.Do(req)
	if err != nil {
		return delivery.Receipt{}, false, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	switch resp.StatusCode {
	case http.StatusOK:
		return delivery.Receipt{ExternalID: string(b)}, true, nil
	case http.StatusNotFound:
		return delivery.Receipt{}, false, nil
	}
	return delivery.Receipt{}, false, fmt.Errorf("lookup: HTTP %d", resp.StatusCode)
}

// helpdesk is the parent's fake: it counts every create per key and never
// deduplicates, so a second send would show as a second ticket.
type helpdesk struct {
	mu       sync.Mutex
	creates  map[string]int
	received chan string   // each create's key, once committed
	hold     chan struct{} // when set, a create waits here after committing
}

func (h *helpdesk) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		key := r.Header.Get("Idempotency-Key")
		h.mu.Lock()
		h.creates[key]++
		h.mu.Unlock()
		h.received <- key
		if h.hold != nil {
			<-h.hold // the worker is killed meanwhile
		}
		_, _ = io.WriteString(w, "hd-"+key) //nolint:gosec // plain text to the test's own client, never a browser
	case http.MethodGet:
		key := r.URL.Query().Get("key")
		h.mu.Lock()
		n := h.creates[key]
		h.mu.Unlock()
		if n == 0 {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, "hd-"+key) //nolint:gosec // plain text to the test's own client, never a browser
	}
}

func (h *helpdesk) count(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.creates[key]
}

// Kill runs a real worker process on the store and kills it (SIGKILL)
// before its send, while the helpdesk holds its request after committing,
// and after the helpdesk answered but before the state was recorded. Each
// time the ticket is left delivering, and the next worker, once the lease
// has run out, finishes it without a second helpdesk ticket. env names the
// store for the worker process (see KillMain).
func Kill(t *testing.T, s Adapter, env ...string) {
	for _, stage := range []string{"before", "during", "after"} {
		t.Run("killed "+stage+" the send", func(t *testing.T) {
			e := NewEnv(t, s, true)
			e.Now = time.Now()
			id := e.Create(`{"title":"Killed worker"}`)
			hd := &helpdesk{creates: map[string]int{}, received: make(chan string, 4)}
			if stage == "during" {
				hd.hold = make(chan struct{})
			}
			srv := httptest.NewServer(hd)
			defer srv.Close()

			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), append(env, envKillStage+"="+stage, envKillTicket+"="+id, envKillURL+"="+srv.URL)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := make(chan string, 4)
			go func() {
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			// Before and after: the worker's marker; during: the helpdesk
			// has committed the create and holds its answer.
			marker := lines
			received := hd.received
			if stage == "during" {
				marker = nil
			} else {
				received = nil
			}
			want := map[string]string{"before": markSending, "after": markRecording}[stage]
			select {
			case line := <-marker:
				if line != want {
					t.Fatalf("worker printed %q, want %q; stderr: %s", line, want, stderr.String())
				}
			case <-received:
			case <-time.After(60 * time.Second):
				t.Fatalf("worker never reached the kill point; stderr: %s", stderr.String())
			}
			if err := cmd.Process.Kill(); err != nil { // SIGKILL
				t.Fatal(err)
			}
			_ = cmd.Wait()
			if hd.hold != nil {
				close(hd.hold)
			}
			if stage == "after" {
				<-hd.received
			}

			r := e.Record(id)
			if r.State != delivery.StateDelivering {
				t.Fatalf("after the kill: %+v, want delivering", r)
			}
			// Under the killed worker's live lease, nobody takes it.
			next := &delivery.Engine{Store: s, Destination: &httpDest{url: srv.URL}}
			if _, err := next.Deliver(context.Background(), id); !errors.Is(err, delivery.ErrNotClaimable) {
				t.Fatalf("Deliver under the killed worker's lease: %v, want ErrNotClaimable", err)
			}
			// The next worker, once the lease has run out. A lookup that
			// answers absent inside the window of the killed worker's
			// possible send is not trusted: the ticket comes due again
			// when that window has closed, within a minute of the lease's
			// end, and is finished then.
			leaseEnd := r.LeaseUntil
			later := time.Now().Add(childLease + 2*time.Second)
			next.Now = func() time.Time { return later }
			st, err := next.Deliver(context.Background(), id)
			for n := 0; err == nil && st == delivery.StatePending && n < 3; n++ {
				due := e.Record(id).DueAt
				if due.Sub(leaseEnd) > time.Minute {
					t.Fatalf("next worker: due %v, more than a minute after the lease's end %v", due, leaseEnd)
				}
				later = later.Add(max(due.Sub(later), 0))
				st, err = next.Deliver(context.Background(), id)
			}
			if err != nil || st != delivery.StateDelivered {
				t.Fatalf("next worker: %s, %v", st, err)
			}
			r = e.Record(id)
			if r.State != delivery.StateDelivered || r.ExternalID != "hd-"+id {
				t.Fatalf("after the next worker: %+v", r)
			}
			if n := hd.count(id); n != 1 {
				t.Fatalf("helpdesk holds %d tickets for %s, want 1", n, id)
			}
		})
	}
}
