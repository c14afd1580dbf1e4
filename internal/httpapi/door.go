package httpapi

import (
	"bytes"
	"encoding/json"
	"encoding/json/jsontext"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/tracing"
)

// Answer is how the callback answers one outcome of the service: the
// response (status and name) and the JSON body, without its trailing line
// break. Other doors to the same service (the MCP door) answer with these
// very bytes, so a body is encoded in one place. A body that does not
// encode is the internal response with its body.
func Answer(o core.Outcome) (Response, []byte) {
	rep := answer(o)
	b, err := json.Marshal(rep.body)
	if err != nil {
		b, _ = json.Marshal(errorBody{ResponseInternal.Name})
		return ResponseInternal, b
	}
	return rep.response, b
}

// WriteRefusal writes r as the callback writes a refusal: status r.Status,
// the short JSON body {"error":r.Name}, and the callback's headers.
func WriteRefusal(w http.ResponseWriter, r Response) { write(w, refuse(r, nil)) }

// WriteRefusalMessage writes r as WriteRefusal does, with message (what
// the request lacks, for the client's developer) as the body's "message"
// when not empty: {"error":r.Name,"message":message}.
func WriteRefusalMessage(w http.ResponseWriter, r Response, message string) {
	if message == "" {
		WriteRefusal(w, r)
		return
	}
	write(w, reply{response: r, body: struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}{r.Name, message}})
}

// SetRequestID decodes raw, a JSON value that carries a request_id, with
// the callback's strict decoding of metadata.request_id: a string with
// invalid UTF-8 or a lone surrogate escape is malformed, a value of another
// type is not a string, null leaves the request_id empty. It sets c's
// request_id fields and nothing else.
func SetRequestID(c *core.Call, raw jsontext.Value) error {
	var t exactText
	if len(raw) > 0 {
		if err := t.UnmarshalJSONFrom(jsontext.NewDecoder(bytes.NewReader(raw), envelopeOptions)); err != nil {
			return err
		}
	}
	c.RequestID, c.RequestIDMalformed, c.RequestIDNotString = t.s, t.malformed, t.notString
	return nil
}

// ReadBody reads r's body as the callback reads it (step 1 of the order of
// checks): larger than limit (after base64 decoding) is refused with
// TooLarge, a base64 body that does not decode with BadRequest; ok is
// false then, and refusal says which.
func ReadBody(r *http.Request, limit int64) (body []byte, refusal Response, ok bool) {
	b, rep, ok := (&Handler{MaxBody: limit}).readBody(r)
	return b, rep.response, ok
}

// ClipLogged cuts a value the caller chose to what a log line carries of
// it (MaxLoggedLen bytes).
func ClipLogged(s string) string { return clipLogged(s) }

// LineAttrs is the capacity a door's callback line needs: the attributes
// of AppendCallbackAttrs, the error and the metrics' group.
const LineAttrs = 11

// AppendCallbackAttrs appends to attrs the attributes of a callback line
// from path to code (section Logs and metrics of docs/contract.md),
// written alike by every door: o is the service's outcome (zero when the
// service did not run), answered as name with HTTP status after d; the
// operation key is there once derived, the code for a rejection. path is
// already clipped. A door passes a buffer of capacity LineAttrs that
// stays on its stack (BenchmarkHandlerOverhead counts the allocation a
// returned slice would add to every callback).
func AppendCallbackAttrs(attrs []slog.Attr, path, door string, o core.Outcome, name string, status int, d time.Duration) []slog.Attr {
	attrs = append(attrs,
		slog.String("path", path),
		slog.String("door", door),
		slog.String("function", clipLogged(o.Function)),
		slog.String("tenant", o.TenantID),
		slog.String("outcome", name),
		slog.Int("http_status", status),
		slog.Float64("duration_ms", float64(d.Microseconds())/1000),
	)
	if o.Key != "" {
		attrs = append(attrs, slog.String("operation_key", o.Key))
	}
	if o.Code != "" {
		attrs = append(attrs, slog.String("code", o.Code))
	}
	return attrs
}

// SpanOutcome is what a door's span carries of the request whose service
// outcome is o, answered as name: the members of its callback line that
// AppendCallbackAttrs takes from o, clipped alike.
func SpanOutcome(door string, o core.Outcome, name string) tracing.Outcome {
	return tracing.Outcome{Door: door, Function: clipLogged(o.Function), Tenant: o.TenantID, Outcome: name,
		Code: o.Code, OperationKey: o.Key}
}

// response is Response under the name reply embeds it by (the table is
// Responses).
type response = Response

// reply is one request's answer and what its log line needs.
type reply struct {
	response
	body any
	out  core.Outcome // the service's outcome, when the service ran
	err  error        // why the request was refused or failed; logged, never sent
}

// The bodies, in the order their members are written.
type (
	errorBody struct {
		Error string `json:"error"`
	}
	retryableBody struct {
		Status    string `json:"status"`
		Retryable bool   `json:"retryable"`
		Message   string `json:"message"`
	}
	rejectionBody struct {
		Status string      `json:"status"`
		Error  codeMessage `json:"error"`
	}
	codeMessage struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
)

// refuse answers with a short error body, no detail.
func refuse(r response, err error) reply {
	return reply{response: r, body: errorBody{r.Name}, err: err}
}

// answer turns the service's outcome into its reply.
func answer(o core.Outcome) reply {
	r, ok := Responses[o.Kind]
	switch {
	case !ok:
		return reply{response: ResponseInternal, body: errorBody{ResponseInternal.Name}, out: o,
			err: fmt.Errorf("outcome %v has no response", o.Kind)}
	case o.Kind.ToolAnswer() && len(o.Body) == 0:
		return reply{response: ResponseInternal, body: errorBody{ResponseInternal.Name}, out: o,
			err: fmt.Errorf("outcome %v without its body", o.Kind)}
	}
	rep := reply{response: r, out: o, err: o.Err}
	switch k := o.Kind; {
	case k.ToolAnswer():
		// The tool's own answer, sent as the tool encoded it: the one
		// encoding of an answer and its replay. A body that is not JSON is
		// answered 500 by write.
		rep.body = o.Body
	case k == core.KindInProgress, k == core.KindBusy:
		rep.body = retryableBody{r.Name, true, o.Message}
	case k == core.KindRejected, k == core.KindConflict:
		rep.body = rejectionBody{r.Name, codeMessage{o.Code, o.Message}}
	default:
		rep.body = errorBody{r.Name}
	}
	return rep
}

// write sends rep as JSON and returns what was sent; a body that does not
// encode is answered 500.
func write(w http.ResponseWriter, rep reply) reply {
	b, err := json.Marshal(rep.body)
	if err != nil {
		rep = reply{response: ResponseInternal, out: rep.out, err: err}
		b, _ = json.Marshal(errorBody{ResponseInternal.Name})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(rep.Status)
	_, _ = w.Write(append(b, '\n'))
	return rep
}
