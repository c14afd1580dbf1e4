//go:build !windows

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// server is a running local binary.
type server struct {
	t    *testing.T
	cmd  *exec.Cmd
	addr string
	log  testenv.Buffer
	done chan struct{} // closed once stderr is drained
}

// startServer runs the built local binary on cfg and waits until it says
// where it listens.
func startServer(t *testing.T, bin, cfg string) *server {
	t.Helper()
	s := &server{t: t, cmd: localCommand(t, bin, "-config", cfg), done: make(chan struct{})}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.cmd.Process.Kill(); _ = s.cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			_, _ = s.log.Write([]byte(sc.Text() + "\n"))
			if rest, ok := strings.CutPrefix(sc.Text(), "callback listening on http://"); ok {
				addr <- strings.TrimSuffix(rest, "/callback")
			}
		}
	}()
	select {
	case s.addr = <-addr:
	case <-s.done:
		t.Fatalf("the server stopped before listening:\n%s", s.logs())
	case <-time.After(time.Minute):
		t.Fatalf("the server never said where it listens:\n%s", s.logs())
	}
	return s
}

func (s *server) logs() string { return s.log.String() }

// call posts a callback body and decodes the answer.
func (s *server) call(body string) map[string]any {
	s.t.Helper()
	res, err := http.Post("http://"+s.addr+"/callback", "application/json", strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var out map[string]any
	if res.StatusCode != 200 || json.Unmarshal(b, &out) != nil {
		s.t.Fatalf("callback answered %d %s", res.StatusCode, b)
	}
	return out
}

// delivery answers get_ticket for id and returns its "delivery" object.
func (s *server) delivery(id string) map[string]any {
	s.t.Helper()
	out := s.call(callbacktest.Body("get_ticket", `{"ticket_id":`+callbacktest.Quote(id)+`}`, callbacktest.Context("user-a", "get-"+id)))
	tk, _ := out["ticket"].(map[string]any)
	d, _ := tk["delivery"].(map[string]any)
	return d
}

// terminate sends SIGTERM, as a service manager stops the server.
func (s *server) terminate() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatal(err)
	}
}

// stop sends SIGTERM and wants a clean exit.
func (s *server) stop() {
	s.t.Helper()
	s.terminate()
	<-s.done
	if err := s.cmd.Wait(); err != nil {
		s.t.Fatalf("server exit after SIGTERM: %v\n%s", err, s.logs())
	}
	if !strings.Contains(s.logs(), "delivery worker stopped") {
		s.t.Fatalf("no clean stop of the delivery worker:\n%s", s.logs())
	}
}

func waitFor(t *testing.T, what string, cond func() bool, logs func() string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 30 s\n%s", what, logs())
		}
	}
}

// deliveryBlock is the config file's delivery block for the fake.
func deliveryBlock(fake *fakehelpdesk.Server, kind string) string {
	fc := fake.Config()
	if kind == "zendesk" {
		return fmt.Sprintf(`{"kind":"zendesk","url":%q,"email":%q,"token":%q,"timeout":"2s"}`, fake.URL(), fc.Email, fc.Token)
	}
	return fmt.Sprintf(`{"kind":"webhook","url":%q,"secret":%q,"lookup":true,"timeout":"2s"}`, fake.WebhookURL(), fc.Secret)
}

// TestLocalServerDelivers: the built local binary, configured with a
// delivery block pointing at the fake helpdesk (Zendesk, then a webhook),
// on SQLite and on DynamoDB Local, takes callbacks and delivers each new
// ticket: the fake holds each once (a repeated callback makes no second
// one), get_ticket shows "delivered" with the helpdesk's id and URL, and
// SIGTERM stops server and worker cleanly. The operator's command then
// lists them as delivered.
func TestLocalServerDelivers(t *testing.T) {
	bin := buildLocal(t)
	stores := map[string]func(t *testing.T) string{
		"sqlite": func(t *testing.T) string {
			return fmt.Sprintf(`{"kind":"sqlite","path":%q}`, filepath.Join(t.TempDir(), "tickets.sqlite"))
		},
		"dynamodb": func(t *testing.T) string {
			endpoint := testenv.DynamoDB(t)
			return fmt.Sprintf(`{"kind":"dynamodb","endpoint":%q,"table":%q}`, endpoint, testenv.CreateTable(t, endpoint))
		},
	}
	for _, storeKind := range []string{"sqlite", "dynamodb"} {
		for _, kind := range []string{"zendesk", "webhook"} {
			t.Run(storeKind+"/"+kind, func(t *testing.T) {
				fake := fakehelpdesk.New(t, fakehelpdesk.Config{})
				cfg := writeConfig(t, fmt.Sprintf(`{"listen":"127.0.0.1:0","insecure_no_auth":true,"store":%s,
					"users":{"user-a":{"tenant_id":"tenant-a","user_id":"alice"}},"delivery":%s}`,
					stores[storeKind](t), deliveryBlock(fake, kind)))
				s := startServer(t, bin, cfg)
				var ids []string
				for i := range 3 {
					out := s.call(callbacktest.Create("user-a", fmt.Sprintf("r-%d", i), callbacktest.Title(fmt.Sprintf("Printer %d", i))))
					ids = append(ids, out["ticket_id"].(string))
				}
				if again := s.call(callbacktest.Create("user-a", "r-0", callbacktest.Title("Printer 0"))); again["deduplicated"] != true {
					t.Fatalf("repeat: %v", again)
				}
				waitFor(t, "every ticket delivered", func() bool {
					for _, id := range ids {
						if d := s.delivery(id); d["state"] != "delivered" {
							return false
						}
					}
					return true
				}, s.logs)
				if fake.Total() != 3 {
					t.Fatalf("the fake holds %d tickets, want 3", fake.Total())
				}
				for _, id := range ids {
					d := s.delivery(id)
					if fake.Held(id) != 1 || d["external_id"] == "" || d["external_id"] == nil ||
						!strings.HasPrefix(fmt.Sprint(d["external_url"]), fake.URL()+"/") {
						t.Fatalf("%s: the fake holds %d; get_ticket delivery %v", id, fake.Held(id), d)
					}
				}
				creates := fake.Requests(fakehelpdesk.ZendeskCreate) + fake.Requests(fakehelpdesk.WebhookCreate)
				if creates != 3 {
					t.Fatalf("%d creates sent for 3 tickets", creates)
				}
				s.stop()
				if logs := s.logs(); strings.Contains(logs, fake.Config().Token) || strings.Contains(logs, fake.Config().Secret) ||
					!strings.Contains(logs, `"msg":"delivering tickets"`) {
					t.Fatalf("the server's log shows a credential, or not that it delivers:\n%s", logs)
				}

				code, stdout, stderr := runLocalBinary(t, operatorBin(bin), "-config", cfg, "list", "-state", "delivered")
				if code != 0 || strings.Count(stdout, "\n") != 4 || !strings.Contains(stderr, "3 delivered delivery record(s)") {
					t.Fatalf("deliveries list: %d\n%s%s", code, stdout, stderr)
				}
				for _, id := range ids {
					if !strings.Contains(stdout, id) {
						t.Fatalf("deliveries list does not show %s:\n%s", id, stdout)
					}
				}
			})
		}
	}
}

// TestLocalServerResumesAfterKill: the local server is killed (SIGKILL)
// while the helpdesk holds one ticket's committed create unanswered and
// another ticket waits out a 429's Retry-After. Started again on the same
// file, it finishes both: the held one once its lease has run out, by a
// lookup that finds it (no second create), the other when due.
func TestLocalServerResumesAfterKill(t *testing.T) {
	bin := buildLocal(t)
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{})
	fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.WebhookCreate, N: 1, Fault: fakehelpdesk.CommitThenSlow(time.Minute)})
	fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.WebhookCreate, N: 2, Fault: fakehelpdesk.TooManyRequests("3")})
	cfg := writeConfig(t, fmt.Sprintf(`{"listen":"127.0.0.1:0","insecure_no_auth":true,
		"store":{"kind":"sqlite","path":%q},"users":{"user-a":{"tenant_id":"tenant-a","user_id":"alice"}},
		"delivery":{"kind":"webhook","url":%q,"secret":%q,"lookup":true,"timeout":"1s"}}`,
		filepath.Join(t.TempDir(), "tickets.sqlite"), fake.WebhookURL(), fake.Config().Secret))
	s := startServer(t, bin, cfg)
	held := s.call(callbacktest.Create("user-a", "r-held", callbacktest.Title("Held")))["ticket_id"].(string)
	waitFor(t, "the helpdesk holds the first create", func() bool { return fake.InFlight() == 1 }, s.logs)
	later := s.call(callbacktest.Create("user-a", "r-later", callbacktest.Title("Later")))["ticket_id"].(string)
	waitFor(t, "the second create answered 429", func() bool { return fake.Requests(fakehelpdesk.WebhookCreate) == 2 }, s.logs)
	if d := s.delivery(held); d["state"] != "delivering" {
		t.Fatalf("held ticket before the kill: %v", d)
	}
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = s.cmd.Wait()
	if fake.Held(held) != 1 || fake.Held(later) != 0 {
		t.Fatalf("before the restart the fake holds %d and %d", fake.Held(held), fake.Held(later))
	}

	s = startServer(t, bin, cfg)
	for _, id := range []string{held, later} {
		waitFor(t, id+" delivered after the restart", func() bool { return s.delivery(id)["state"] == "delivered" }, s.logs)
	}
	if fake.Held(held) != 1 || fake.Held(later) != 1 || fake.Total() != 2 {
		t.Fatalf("the fake holds %d and %d, %d in all; want 1, 1, 2", fake.Held(held), fake.Held(later), fake.Total())
	}
	if n := fake.Requests(fakehelpdesk.WebhookCreate); n != 3 {
		t.Fatalf("%d creates; want 3 (held once, later twice)", n)
	}
	if fake.Requests(fakehelpdesk.WebhookLookup) < 1 {
		t.Fatal("the held ticket was not looked up before being finished")
	}
	s.stop()
}

// TestLocalServerSIGTERMFinishesDelivery: SIGTERM while the helpdesk is
// still answering a create: the server stops taking callbacks, waits for
// the delivery in flight, records it, and exits 0; the ticket is
// delivered once.
func TestLocalServerSIGTERMFinishesDelivery(t *testing.T) {
	bin := buildLocal(t)
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{})
	fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.ZendeskCreate, N: 1, Fault: fakehelpdesk.Fault{Delay: time.Second}})
	db := filepath.Join(t.TempDir(), "tickets.sqlite")
	cfg := writeConfig(t, fmt.Sprintf(`{"listen":"127.0.0.1:0","insecure_no_auth":true,
		"store":{"kind":"sqlite","path":%q},"users":{"user-a":{"tenant_id":"tenant-a","user_id":"alice"}},"delivery":%s}`,
		db, deliveryBlock(fake, "zendesk")))
	s := startServer(t, bin, cfg)
	id := s.call(callbacktest.Create("user-a", "r-term", callbacktest.Title("Stopping")))["ticket_id"].(string)
	waitFor(t, "the create in flight", func() bool { return fake.InFlight() == 1 }, s.logs)
	s.stop() // SIGTERM, exit 0
	if fake.Held(id) != 1 || fake.Requests(fakehelpdesk.ZendeskCreate) != 1 {
		t.Fatalf("the fake holds %d after %d creates", fake.Held(id), fake.Requests(fakehelpdesk.ZendeskCreate))
	}
	code, stdout, stderr := runLocalBinary(t, operatorBin(bin), "-config", cfg, "show", id)
	if code != 0 || !strings.Contains(stdout, "delivered") || !strings.Contains(stdout, fake.URL()+"/agent/tickets/") {
		t.Fatalf("after the stop: %d\n%s%s", code, stdout, stderr)
	}
}

// TestLocalServerChecksLookupsAtStart: the local server looks up a key no
// ticket has at start, and logs an error line saying the helpdesk refused
// it when the token may create but not list tickets.
func TestLocalServerChecksLookupsAtStart(t *testing.T) {
	bin := buildLocal(t)
	for _, refuse := range []bool{false, true} {
		fake := fakehelpdesk.New(t, fakehelpdesk.Config{})
		if refuse {
			fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.ZendeskLookup, Fault: fakehelpdesk.Forbidden()})
		}
		cfg := writeConfig(t, fmt.Sprintf(`{"listen":"127.0.0.1:0","insecure_no_auth":true,"store":{"kind":"sqlite","path":%q},
			"users":{"user-a":{"tenant_id":"tenant-a","user_id":"alice"}},"delivery":%s}`,
			filepath.Join(t.TempDir(), "tickets.sqlite"), deliveryBlock(fake, "zendesk")))
		s := startServer(t, bin, cfg)
		want := `"level":"INFO","msg":"delivery check","result":"delivery check: lookups work`
		if refuse {
			want = `"level":"ERROR","msg":"delivery check","result":"delivery check: REFUSED: the helpdesk refused a lookup (HTTP 403)`
		}
		waitFor(t, "the check's line", func() bool { return strings.Contains(s.logs(), want) }, s.logs)
		s.stop()
		if fake.Requests(fakehelpdesk.ZendeskLookup) != 1 {
			t.Fatalf("%d lookups at start, want 1", fake.Requests(fakehelpdesk.ZendeskLookup))
		}
	}
}
