package iam

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

// Account fixes the partition, region and account of the ARNs a recorder
// builds; use the same values as the Stack the policies are resolved in.
type Account struct{ Partition, Region, ID string }

func (a Account) arn(service, resource string) string {
	return fmt.Sprintf("arn:%s:%s:%s:%s:%s", a.Partition, service, a.Region, a.ID, resource)
}

// LeadingKeys is the condition key DynamoDB sets to the partition key
// values a request touches.
const LeadingKeys = "dynamodb:LeadingKeys"

// Recorder is a recording proxy in front of DynamoDB Local: point a
// program's DynamoDB endpoint (AWS_ENDPOINT_URL_DYNAMODB) at URL, and
// every request it forwards is turned into the authorizations IAM makes
// for it (Requests):
//
//   - GetItem, PutItem, UpdateItem, DeleteItem: the action on the table's
//     ARN, dynamodb:LeadingKeys the item's partition key;
//   - TransactWriteItems: no action of its own; each item is authorized as
//     PutItem, UpdateItem, DeleteItem or ConditionCheckItem on its own
//     table and partition key (TransactGetItems' as GetItem);
//   - BatchGetItem, BatchWriteItem: the action on each table, with the
//     partition keys of that table's items;
//   - Query: the table's or index's ARN, dynamodb:LeadingKeys the value the
//     key condition gives the queried table's or index's partition key;
//     Scan and the table operations (DescribeTable...): the table's or
//     index's ARN, no leading keys;
//   - the streams API (DescribeStream, GetShardIterator, GetRecords): the
//     stream's ARN, GetRecords' found from the iterator an earlier answer
//     gave; ListStreams of a table: the ARN of all its streams
//     (table/NAME/stream/*), without a table "*".
//
// ARNs carry the Account's partition, region and account, whatever
// DynamoDB Local writes in its own stream ARNs.
type Recorder struct {
	acct   Account
	keys   Keys
	target *url.URL
	srv    *httptest.Server

	mu        sync.Mutex
	reqs      []Request
	iterators map[string]string // shard iterator → stream ARN
	errs      []string
}

// Keys names the partition key attribute of each table (by table name;
// "" for any table not named) and of each index (by index name).
type Keys struct {
	Tables, Indexes map[string]string
}

// NewRecorder starts a recorder in front of the DynamoDB (Local) at
// endpoint; it stops when t ends.
func NewRecorder(t testing.TB, endpoint string, acct Account, keys Keys) *Recorder {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		t.Fatalf("iam: endpoint %q: want http://host:port", endpoint)
	}
	r := &Recorder{acct: acct, keys: keys, target: u, iterators: map[string]string{}}
	r.srv = httptest.NewServer(r)
	t.Cleanup(r.srv.Close)
	return r
}

// URL is the endpoint to give the program.
func (r *Recorder) URL() string { return r.srv.URL }

// Requests returns the authorizations recorded so far, in order.
func (r *Recorder) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

// Errors returns the requests the recorder could not interpret (each
// then recorded as an action on "*" with no context, which a least
// privilege policy denies): a test fails on them.
func (r *Recorder) Errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.errs)
}

// ServeHTTP forwards one request to DynamoDB Local and records it.
func (r *Recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, "iam recorder: "+err.Error(), http.StatusBadRequest)
		return
	}
	dest := *r.target
	dest.Path, dest.RawQuery = req.URL.Path, req.URL.RawQuery
	out, err := http.NewRequestWithContext(req.Context(), req.Method, dest.String(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, "iam recorder: "+err.Error(), http.StatusInternalServerError)
		return
	}
	out.Header = req.Header.Clone()
	out.Host = req.Host // the host the request was signed for
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, "iam recorder: forwarding: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, "iam recorder: reading the answer: "+err.Error(), http.StatusBadGateway)
		return
	}
	r.record(req.Header.Get("X-Amz-Target"), body, answer)
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// attrs is an item or key as DynamoDB's JSON protocol writes it.
type attrs map[string]map[string]json.RawMessage

// str is the string value of attribute name in a, if it is a string.
func (a attrs) str(name string) (string, bool) {
	raw, ok := a[name]["S"]
	var s string
	if !ok || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func (r *Recorder) record(target string, body, answer []byte) {
	service, op, _ := strings.Cut(target, ".")
	var reqs []Request
	var err error
	switch {
	case strings.HasPrefix(service, "DynamoDBStreams_"):
		reqs, err = r.streams(op, body, answer)
	case strings.HasPrefix(service, "DynamoDB_"):
		reqs, err = r.dynamodb(op, body)
	default:
		err = fmt.Errorf("unknown target %q", target)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.errs = append(r.errs, fmt.Sprintf("%s: %v", target, err))
		reqs = []Request{{Action: "dynamodb:" + op, Resource: "*"}}
	}
	r.reqs = append(r.reqs, reqs...)
}

func (r *Recorder) table(name string) string { return r.acct.arn("dynamodb", "table/"+name) }

func (r *Recorder) tableKey(table string) string {
	if k, ok := r.keys.Tables[table]; ok {
		return k
	}
	return r.keys.Tables[""]
}

// item is the authorization of action on one item of table.
func (r *Recorder) item(action, table string, key attrs) (Request, error) {
	pk, ok := key.str(r.tableKey(table))
	if !ok {
		return Request{}, fmt.Errorf("%s on %s: no string partition key %q", action, table, r.tableKey(table))
	}
	return Request{Action: "dynamodb:" + action, Resource: r.table(table), Context: map[string][]string{LeadingKeys: {pk}}}, nil
}

func (r *Recorder) dynamodb(op string, body []byte) ([]Request, error) {
	var in struct {
		TableName, IndexName      string
		Key, Item                 attrs
		KeyConditionExpression    string
		ExpressionAttributeNames  map[string]string
		ExpressionAttributeValues attrs
		TransactItems             []map[string]struct {
			TableName string
			Key, Item attrs
		}
		RequestItems map[string]json.RawMessage
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, err
	}
	switch op {
	case "GetItem", "UpdateItem", "DeleteItem":
		q, err := r.item(op, in.TableName, in.Key)
		return []Request{q}, err
	case "PutItem":
		q, err := r.item(op, in.TableName, in.Item)
		return []Request{q}, err
	case "TransactWriteItems", "TransactGetItems":
		var out []Request
		for _, ti := range in.TransactItems {
			if len(ti) != 1 {
				return nil, fmt.Errorf("%s: an item with %d actions", op, len(ti))
			}
			for kind, a := range ti {
				action, key := map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
					"ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}[kind], a.Key
				if action == "" {
					return nil, fmt.Errorf("%s: item action %q", op, kind)
				}
				if kind == "Put" {
					key = a.Item
				}
				q, err := r.item(action, a.TableName, key)
				if err != nil {
					return nil, err
				}
				out = append(out, q)
			}
		}
		return out, nil
	case "BatchGetItem", "BatchWriteItem":
		return r.batch(op, in.RequestItems)
	case "Query":
		resource, keyAttr := r.table(in.TableName), r.tableKey(in.TableName)
		if in.IndexName != "" {
			resource += "/index/" + in.IndexName
			keyAttr = r.keys.Indexes[in.IndexName]
		}
		v, err := keyValue(in.KeyConditionExpression, keyAttr, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
		if err != nil {
			return nil, fmt.Errorf("a Query on %s: %w", resource, err)
		}
		return []Request{{Action: "dynamodb:Query", Resource: resource, Context: map[string][]string{LeadingKeys: {v}}}}, nil
	}
	if in.TableName == "" {
		return []Request{{Action: "dynamodb:" + op, Resource: "*"}}, nil
	}
	resource := r.table(in.TableName)
	if in.IndexName != "" {
		resource += "/index/" + in.IndexName
	}
	return []Request{{Action: "dynamodb:" + op, Resource: resource}}, nil
}

func (r *Recorder) batch(op string, items map[string]json.RawMessage) ([]Request, error) {
	var out []Request
	tables := make([]string, 0, len(items))
	for t := range items {
		tables = append(tables, t)
	}
	sort.Strings(tables)
	for _, table := range tables {
		var keys []attrs
		if op == "BatchGetItem" {
			var g struct{ Keys []attrs }
			if err := json.Unmarshal(items[table], &g); err != nil {
				return nil, err
			}
			keys = g.Keys
		} else {
			var ws []struct {
				PutRequest    *struct{ Item attrs }
				DeleteRequest *struct{ Key attrs }
			}
			if err := json.Unmarshal(items[table], &ws); err != nil {
				return nil, err
			}
			for _, w := range ws {
				switch {
				case w.PutRequest != nil:
					keys = append(keys, w.PutRequest.Item)
				case w.DeleteRequest != nil:
					keys = append(keys, w.DeleteRequest.Key)
				}
			}
		}
		q := Request{Action: "dynamodb:" + op, Resource: r.table(table), Context: map[string][]string{LeadingKeys: {}}}
		for _, k := range keys {
			pk, ok := k.str(r.tableKey(table))
			if !ok {
				return nil, fmt.Errorf("%s on %s: an item without a string partition key", op, table)
			}
			q.Context[LeadingKeys] = append(q.Context[LeadingKeys], pk)
		}
		out = append(out, q)
	}
	return out, nil
}

// keyCondition reads "name = :value" clauses of a key condition.
var keyCondition = regexp.MustCompile(`([#A-Za-z0-9_.]+)\s*=\s*(:[A-Za-z0-9_]+)`)

// keyValue is the string value a key condition expression gives the
// partition key attribute attr.
func keyValue(expr, attr string, names map[string]string, values attrs) (string, error) {
	for _, m := range keyCondition.FindAllStringSubmatch(expr, -1) {
		name := m[1]
		if n, ok := names[name]; ok {
			name = n
		}
		if name != attr {
			continue
		}
		if v, ok := values.str(m[2]); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("the key condition %q sets no string value of %q", expr, attr)
}

// localStream is the part of a stream ARN before the table: DynamoDB
// Local's own partition, region and account.
var localStream = regexp.MustCompile(`^arn:[^:]*:dynamodb:[^:]*:[^:]*:(table/.+/stream/.+)$`)

// Stream is the stream ARN arn (as DynamoDB Local writes it) in the
// recorder's Account.
func (r *Recorder) Stream(arn string) (string, error) {
	m := localStream.FindStringSubmatch(arn)
	if m == nil {
		return "", fmt.Errorf("%q is not a stream ARN", arn)
	}
	return r.acct.arn("dynamodb", m[1]), nil
}

func (r *Recorder) streams(op string, body, answer []byte) ([]Request, error) {
	var in struct{ StreamArn, ShardIterator, TableName string }
	var out struct{ ShardIterator, NextShardIterator string }
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, err
	}
	_ = json.Unmarshal(answer, &out) // an error answer has neither
	var resource string
	var err error
	switch op {
	case "ListStreams":
		resource = "*"
		if in.TableName != "" {
			resource = r.table(in.TableName) + "/stream/*"
		}
	case "GetRecords":
		r.mu.Lock()
		arn, ok := r.iterators[in.ShardIterator]
		r.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("GetRecords with an iterator no recorded answer gave")
		}
		resource = arn
	default: // DescribeStream, GetShardIterator
		if resource, err = r.Stream(in.StreamArn); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
	}
	r.mu.Lock()
	for _, it := range []string{out.ShardIterator, out.NextShardIterator} {
		if it != "" {
			r.iterators[it] = resource
		}
	}
	r.mu.Unlock()
	return []Request{{Action: "dynamodb:" + op, Resource: resource}}, nil
}

// SSM is a fake SSM that serves GetParameter for params (name → value,
// each a SecureString) and records, for each read, the authorizations a
// deployed function needs: ssm:GetParameter on the parameter's ARN, and,
// with decryption, the kms:Decrypt SSM makes with the caller's
// credentials, on a key of the account, with the context SSM gives it
// (kms:ViaService, and the encryption context PARAMETER_ARN). Any other
// request is answered 400 and recorded as "ssm:<action>" on "*".
type SSM struct {
	acct Account
	srv  *httptest.Server

	mu   sync.Mutex
	reqs []Request
}

// ParameterKeyID is the KMS key id in the ARN of the recorded decryption.
const ParameterKeyID = "00000000-0000-0000-0000-0000000055a7"

// NewSSM starts a fake SSM serving params; it stops when t ends.
func NewSSM(t testing.TB, acct Account, params map[string]string) *SSM {
	t.Helper()
	s := &SSM{acct: acct}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, action, _ := strings.Cut(req.Header.Get("X-Amz-Target"), ".")
		var in struct {
			Name           string
			WithDecryption bool
		}
		value, known := "", false
		if json.NewDecoder(req.Body).Decode(&in) == nil {
			value, known = params[in.Name]
		}
		if action != "GetParameter" {
			s.add(Request{Action: "ssm:" + action, Resource: "*"})
			http.Error(w, `{"__type":"InvalidAction"}`, http.StatusBadRequest)
			return
		}
		arn := s.Parameter(in.Name)
		s.add(Request{Action: "ssm:GetParameter", Resource: arn})
		if !known {
			http.Error(w, `{"__type":"ParameterNotFound"}`, http.StatusBadRequest)
			return
		}
		if in.WithDecryption {
			s.add(Request{Action: "kms:Decrypt", Resource: acct.arn("kms", "key/"+ParameterKeyID), Context: map[string][]string{
				"kms:ViaService":                      {"ssm." + acct.Region + ".amazonaws.com"},
				"kms:EncryptionContext:PARAMETER_ARN": {arn},
			}})
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_ = json.NewEncoder(w).Encode(map[string]any{"Parameter": map[string]any{
			"Name": in.Name, "Type": "SecureString", "Value": value, "Version": 1, "ARN": arn}})
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// Parameter is the ARN of the parameter name: a name with a leading slash
// is appended to "parameter" as is, one without gets the slash.
func (s *SSM) Parameter(name string) string {
	if !strings.HasPrefix(name, "/") {
		name = "/" + name
	}
	return s.acct.arn("ssm", "parameter"+name)
}

// URL is the endpoint to give the program (AWS_ENDPOINT_URL_SSM).
func (s *SSM) URL() string { return s.srv.URL }

// Requests returns the authorizations recorded so far, in order.
func (s *SSM) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

func (s *SSM) add(q Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, q)
}

// Kind is a request with its leading keys cut to their prefix ("OP#*"):
// the kind a role check reports, one line per kind.
func Kind(q Request) string {
	s := q.Action + " on " + q.Resource
	if v, ok := q.Context[LeadingKeys]; ok {
		seen := map[string]bool{}
		var ps []string
		for _, k := range v {
			p := k
			if i := strings.Index(k, "#"); i >= 0 {
				p = k[:i+1] + "*"
			}
			if !seen[p] {
				seen[p] = true
				ps = append(ps, p)
			}
		}
		sort.Strings(ps)
		s += " with " + LeadingKeys + "=" + strings.Join(ps, ",")
	}
	for _, k := range sortedKeys(q.Context) {
		if k != LeadingKeys {
			s += fmt.Sprintf(" %s=%s", k, strings.Join(q.Context[k], ","))
		}
	}
	return s
}

func sortedKeys(m map[string][]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
