package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/coretest"
)

// Environment of a child process started by Processes.
const (
	envChild   = "STORETEST_CHILD"   // set in a child
	envCalls   = "STORETEST_CALLS"   // callbacks the child sends
	envWorkers = "STORETEST_WORKERS" // how many at once
	envMode    = "STORETEST_MODE"    // "same": one request for all; "distinct": one request each
	envProc    = "STORETEST_PROC"    // the child's index
	envStart   = "STORETEST_START"   // unix nanos to start at, so children overlap
	envRunID   = "STORETEST_RUN"     // distinguishes runs sharing one store
)

// Counts are outcome names (core.Kind.String) → how many.
type Counts map[string]int

// ChildMain runs the child side of Processes when this test binary was
// started as a child, then exits; otherwise it returns at once. Call it
// first in TestMain. open opens the store the parent named in the
// environment.
func ChildMain(open func() (core.Store, error)) {
	if os.Getenv(envChild) == "" {
		return
	}
	counts, err := child(open)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = json.NewEncoder(os.Stdout).Encode(counts)
	os.Exit(0)
}

func child(open func() (core.Store, error)) (Counts, error) {
	calls, _ := strconv.Atoi(os.Getenv(envCalls))
	workers, _ := strconv.Atoi(os.Getenv(envWorkers))
	start, _ := strconv.ParseInt(os.Getenv(envStart), 10, 64)
	s, err := open()
	if err != nil {
		return nil, err
	}
	if c, ok := s.(interface{ Close() error }); ok {
		defer c.Close()
	}
	svc := &core.Service{Store: s, Users: Users(), Policy: idem.PolicyArguments,
		Retention: 24 * time.Hour, NewID: uuid.NewString}
	run, proc, mode := os.Getenv(envRunID), os.Getenv(envProc), os.Getenv(envMode)
	jobs := make(chan int)
	var mu sync.Mutex
	counts := Counts{}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				rid := run + "-same"
				if mode == "distinct" {
					rid = fmt.Sprintf("%s-%s-%d", run, proc, i)
				}
				o := svc.Answer(context.Background(), core.Call{Function: core.CreateTicket,
					Content: json.RawMessage(title), ExternalUserID: "user-a", RequestID: rid})
				name := o.Kind.String()
				switch o.Kind {
				case core.KindCreated, core.KindDuplicate:
					name += " " + coretest.TicketID(o)
				case core.KindBusy, core.KindInternal:
					// Say why, so a failing run shows the cause.
					reason := fmt.Sprint(o.Err)
					if len(reason) > 160 {
						reason = reason[:60] + "…" + reason[len(reason)-100:]
					}
					name += "(" + strings.ReplaceAll(reason, " ", "_") + ")"
				}
				mu.Lock()
				counts[name]++
				mu.Unlock()
			}
		}()
	}
	time.Sleep(time.Until(time.Unix(0, start)))
	for i := 0; i < calls; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return counts, nil
}

// Processes starts procs copies of this test binary (TestMain must call
// ChildMain), each sending calls create_ticket callbacks for user-a,
// workers at a time, all starting at the same moment. mode "same" sends
// one identical request from everyone; "distinct" a new request each time.
// env names the store for the children. It returns the summed outcome
// counts; "created <id>" and "deduplicated <id>" carry the ticket id.
func Processes(t *testing.T, procs, calls, workers int, mode string, env ...string) Counts {
	t.Helper()
	run := uuid.NewString()[:8]
	start := time.Now().Add(time.Duration(procs) * 300 * time.Millisecond).UnixNano()
	type result struct {
		counts Counts
		err    error
		stderr string
	}
	results := make(chan result, procs)
	for p := 0; p < procs; p++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envChild+"=1", envCalls+"="+strconv.Itoa(calls), envWorkers+"="+strconv.Itoa(workers),
			envMode+"="+mode, envProc+"="+strconv.Itoa(p), envStart+"="+strconv.FormatInt(start, 10), envRunID+"="+run)
		cmd.Env = append(cmd.Env, env...) // the last value of a key wins: callers may set the run id
		go func() {
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			var c Counts
			if err == nil {
				err = json.Unmarshal(out.Bytes(), &c)
			}
			results <- result{c, err, errb.String()}
		}()
	}
	total := Counts{}
	for p := 0; p < procs; p++ {
		r := <-results
		if r.err != nil {
			t.Fatalf("child process: %v\n%s", r.err, r.stderr)
		}
		for k, v := range r.counts {
			total[k] += v
		}
	}
	return total
}

// RunID names the request a later Processes call should share with an
// earlier one ("same" mode): pass RunID(x) in env to both.
func RunID(id string) string { return envRunID + "=" + id }

// Summary reduces counts to outcome → count and the distinct ticket ids
// seen per outcome.
func Summary(c Counts) (byOutcome map[string]int, ids map[string]map[string]bool) {
	byOutcome = map[string]int{}
	ids = map[string]map[string]bool{}
	for k, v := range c {
		name, id, _ := strings.Cut(k, " ")
		byOutcome[name] += v
		if id != "" {
			if ids[name] == nil {
				ids[name] = map[string]bool{}
			}
			ids[name][id] = true
		}
	}
	return byOutcome, ids
}
