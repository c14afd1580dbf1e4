//go:build !windows

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/sqlitetest"
)

// TestLocalServerSIGTERMFinishesInFlight: the built local server gets
// SIGTERM while a callback is in flight (its handler reading a body that
// is half sent). It stops accepting connections, then the rest of the body
// arrives: the callback is answered 200 created, the server exits 0, and
// the ticket is in the SQLite file.
func TestLocalServerSIGTERMFinishesInFlight(t *testing.T) {
	bin := buildLocal(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "tickets.sqlite")
	cfg := writeConfig(t, fmt.Sprintf(`{"listen":"127.0.0.1:0","insecure_no_auth":true,
		"store":{"kind":"sqlite","path":%q},
		"users":{"user-a":{"tenant_id":"tenant-a","user_id":"alice"}}}`, db))
	srv := startServer(t, bin, cfg)
	cmd, addr := srv.cmd, srv.addr

	body := callbacktest.Create("user-a", "r-inflight", callbacktest.Title("In flight"))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Expect: 100-continue makes the server say when the handler starts
	// reading the body: from then on the callback is in flight. (A request
	// whose headers the server has not read when shutdown begins is
	// closed unanswered, by net/http: nothing of it ran.)
	if _, err := fmt.Fprintf(conn, "POST /callback HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n", addr, len(body)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	replies := bufio.NewReader(conn)
	if cont, err := replies.ReadString('\n'); err != nil || !strings.HasPrefix(cont, "HTTP/1.1 100 ") {
		t.Fatalf("want 100 Continue, got %q %v", cont, err)
	}
	if blank, err := replies.ReadString('\n'); err != nil || blank != "\r\n" {
		t.Fatalf("after 100 Continue: %q %v", blank, err)
	}
	half := len(body) / 2
	if _, err := io.WriteString(conn, body[:half]); err != nil {
		t.Fatal(err)
	}
	srv.terminate()
	// Shutdown has begun once the listener refuses new connections.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		_ = c.Close()
		if ctx.Err() != nil {
			t.Fatal("the server still accepts connections 10 s after SIGTERM")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := io.WriteString(conn, body[half:]); err != nil {
		t.Fatalf("the in-flight connection was closed: %v", err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(replies, nil)
	if err != nil {
		_ = cmd.Process.Kill()
		<-srv.done
		t.Fatalf("no answer to the in-flight callback: %v\n%s", err, srv.logs())
	}
	got, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != 200 || !strings.HasPrefix(string(got), `{"status":"created","ticket_id":"`) {
		t.Fatalf("in-flight callback answered %d %s; want 200 created", res.StatusCode, got)
	}
	<-srv.done // all of stderr, before Wait closes the pipe
	logs := srv.logs()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("server exit: %v\n%s", err, logs)
	}
	if !strings.Contains(logs, `"msg":"stopped"`) {
		t.Fatalf("no stopped line:\n%s", logs)
	}
	if n, err := sqlitetest.CountTickets(context.Background(), sqlitetest.Open(t, db)); err != nil || n != 1 {
		t.Fatalf("tickets in the file after shutdown = %d, %v; want 1", n, err)
	}
}
