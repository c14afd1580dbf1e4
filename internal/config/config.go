// Package config reads the two configurations of docs/contract.md,
// Configuration: the Lambda's environment variables and the local server's
// JSON file (the SSM parameters the functions take their secrets from are
// read by lambdart.ReadParameter). Bad configuration is one error naming
// the field, so the program stops at start with one clear line.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Common is what both configurations set. A zero value of a setting whose
// default belongs to another package means that package's default: the
// package that applies a setting owns its default, and this one only
// reads and bounds what is written.
type Common struct {
	Policy       string // as written; doors.CheckSettings parses it (idem.ParsePolicy), "" its default
	Retention    time.Duration
	MaxBodyBytes int64 // 0: httpapi.DefaultMaxBody
	MinCost      int   // 0: nonce.DefaultMinCost; nonce.Settings checks the bounds
	MaxCost      int   // 0: nonce.DefaultMaxCost
	PublicURL    string
}

// Lambda is the configuration of the deployed callback function.
type Lambda struct {
	Common
	TableName        string
	HookKeyParameter string // SSM SecureString name; wins over HookKey
	HookKey          string
	UserCacheTTL     time.Duration // 0: usercache.DefaultTTL
	UserCacheSize    int           // 0: usercache.DefaultSize
	// ResultCacheSize is how many completed operations the warm instance
	// keeps to answer repeats without a DynamoDB call (idem.Cache); 0:
	// doors.DefaultResultCacheSize, ResultCacheOff: no cache
	// (RESULT_CACHE_SIZE=0).
	ResultCacheSize  int
	CallTimeout      time.Duration // each DynamoDB call; 0: dynamo.DefaultCallTimeout
	MetricsNamespace string        // CloudWatch namespace of the EMF metrics; "": metrics.DefaultNamespace
	// Deliver: DELIVERY_KIND names a destination, so new tickets are
	// written pending for the delivery function.
	Deliver bool
	// MCP is the MCP door (MCP_* variables); off when unset.
	MCP MCP
}

// Defaults this package applies itself. The other defaults belong to the
// package that applies them, and a zero setting leaves them to it:
// httpapi.DefaultMaxBody, usercache.DefaultTTL and usercache.DefaultSize,
// dynamo.DefaultCallTimeout, metrics.DefaultNamespace, the key policy's and the
// nonce costs' (doors.CheckSettings), the local file's store block
// (localstore.CheckSettings: kind sqlite, localstore.DefaultSQLitePath),
// and the delivery ones (see Destination).
const (
	DefaultRetention = 24 * time.Hour
	// MinRetention is the shortest deduplication window accepted: agents
	// retry within seconds to minutes, and template.yaml's pattern for
	// RETENTION admits nothing shorter either.
	MinRetention  = time.Minute
	DefaultListen = "127.0.0.1:3210"
)

// Bounds of the integer settings.
const (
	minMaxBody, maxMaxBody             = 1024, 16 << 20
	minUserCacheSize, maxUserCacheSize = 1, 1 << 20
	maxResultCacheSize                 = 1 << 20
)

// ResultCacheOff is Lambda.ResultCacheSize when RESULT_CACHE_SIZE is 0:
// the callback keeps no completed operation in memory.
const ResultCacheOff = -1

// key names a setting: its name in the Lambda's environment, and in the
// local file ("" when only the environment has it).
type key struct {
	env, file string
	// number: the file writes the value as a JSON number (or a string
	// holding one); otherwise as a JSON string.
	number bool
}

// setting is one entry of a table of settings: its names and how its text
// becomes part of a T. Reading a value and naming it in an error both go
// through the same entry, so one setting's value can never be reported
// under another's name.
type setting[T any] struct {
	key
	// parse stores v into c; v is "" when the setting is absent, and parse
	// then applies the default. Its error does not name the setting: the
	// caller does.
	parse func(c *T, v string) error
}

// The settings both configurations share.
var (
	keyPolicySetting = setting[Common]{key{"KEY_POLICY", "key_policy", false}, func(c *Common, v string) error {
		c.Policy = v
		return nil
	}}
	retentionSetting = setting[Common]{key{"RETENTION", "retention", false}, func(c *Common, v string) (err error) {
		if c.Retention, err = duration(v, DefaultRetention); err != nil {
			return err
		}
		if c.Retention < MinRetention {
			return fmt.Errorf("%q is shorter than %s: a window that short deduplicates almost no retry", v, MinRetention)
		}
		return nil
	}}
	maxBodySetting = setting[Common]{key{"MAX_BODY_BYTES", "max_body_bytes", true}, func(c *Common, v string) error {
		n, err := integer(v, 0, minMaxBody, maxMaxBody)
		c.MaxBodyBytes = int64(n)
		return err
	}}
	minCostSetting = setting[Common]{key{"NONCE_MIN_COST", "nonce_min_cost", true}, func(c *Common, v string) (err error) {
		c.MinCost, err = positive(v)
		return err
	}}
	maxCostSetting = setting[Common]{key{"NONCE_MAX_COST", "nonce_max_cost", true}, func(c *Common, v string) (err error) {
		c.MaxCost, err = positive(v)
		return err
	}}
	publicURLSetting = setting[Common]{key{"PUBLIC_URL", "public_url", false}, func(c *Common, v string) error {
		if v != "" && !strings.HasPrefix(v, "https://") && !strings.HasPrefix(v, "http://") {
			return fmt.Errorf("%q must start with https:// or http://", v)
		}
		c.PublicURL = v
		return nil
	}}

	commonSettings = []*setting[Common]{
		&keyPolicySetting, &retentionSetting, &maxBodySetting, &minCostSetting, &maxCostSetting, &publicURLSetting,
	}
)

// lambdaSettings are the settings only the Lambda's environment has.
var lambdaSettings = append(tableSettings(func(c *Lambda) (*string, *string) { return &c.TableName, &c.MetricsNamespace }), []*setting[Lambda]{
	{key{env: "HOOK_KEY_PARAMETER"}, func(c *Lambda, v string) error {
		c.HookKeyParameter = v
		return nil
	}},
	{key{env: "HOOK_KEY"}, func(c *Lambda, v string) error {
		c.HookKey = v
		return nil
	}},
	{key{env: "USER_CACHE_TTL"}, func(c *Lambda, v string) (err error) {
		c.UserCacheTTL, err = duration(v, 0)
		return err
	}},
	{key{env: "USER_CACHE_SIZE"}, func(c *Lambda, v string) (err error) {
		c.UserCacheSize, err = integer(v, 0, minUserCacheSize, maxUserCacheSize)
		return err
	}},
	{key{env: "RESULT_CACHE_SIZE"}, func(c *Lambda, v string) (err error) {
		if v == "0" {
			c.ResultCacheSize = ResultCacheOff
			return nil
		}
		c.ResultCacheSize, err = integer(v, 0, 1, maxResultCacheSize)
		if err != nil {
			return fmt.Errorf("%q is not an integer from 0 (off) to %d", v, maxResultCacheSize)
		}
		return nil
	}},
	{key{env: "STORE_CALL_TIMEOUT"}, func(c *Lambda, v string) (err error) {
		c.CallTimeout, err = duration(v, 0)
		return err
	}},
	{key{env: "DELIVERY_KIND"}, func(c *Lambda, v string) (err error) {
		c.Deliver, err = deliveryKind(v)
		return err
	}},
}...)

// tableSettings are TABLE_NAME and METRICS_NAMESPACE, which both
// functions read alike; fields picks them out of a T.
func tableSettings[T any](fields func(*T) (table, namespace *string)) []*setting[T] {
	return []*setting[T]{
		{key{env: "TABLE_NAME"}, func(c *T, v string) error {
			if v == "" {
				return errors.New("required: the DynamoDB table's name")
			}
			table, _ := fields(c)
			*table = v
			return nil
		}},
		{key{env: "METRICS_NAMESPACE"}, func(c *T, v string) error {
			_, namespace := fields(c)
			*namespace = v
			return nil
		}},
	}
}

// source is where settings are read from: the environment or the file.
type source struct {
	name  func(key) string
	value func(key) (string, error)
}

func envSource(getenv func(string) string) source {
	return source{
		name:  func(k key) string { return k.env },
		value: func(k key) (string, error) { return getenv(k.env), nil },
	}
}

// read applies each of settings to c, in order. The first error stops it
// and names the setting as src calls it.
func read[T any](c *T, settings []*setting[T], src source) error {
	for _, s := range settings {
		v, err := src.value(s.key)
		if err == nil {
			err = s.parse(c, v)
		}
		if err != nil {
			return fmt.Errorf("config: %s: %w", src.name(s.key), err)
		}
	}
	return nil
}

// readCommon reads the shared settings.
func readCommon(src source) (Common, error) {
	var c Common
	err := read(&c, commonSettings, src)
	return c, err
}

// SettingNames name the shared settings and the hook key in errors, as one
// configuration calls them: SettingEnvNames or SettingFileNames. The packages that check
// these settings (nonce, idem) are given their values and these names.
type SettingNames struct {
	Policy, MinCost, MaxCost, HookKey string
}

// The names of the Lambda's environment and of the local file.
var (
	SettingEnvNames  = SettingNames{keyPolicySetting.env, minCostSetting.env, maxCostSetting.env, "HOOK_KEY"}
	SettingFileNames = SettingNames{keyPolicySetting.file, minCostSetting.file, maxCostSetting.file, "hook_key"}
)

// FromEnv reads the callback function's configuration through getenv
// (Env, or a map's in tests).
func FromEnv(getenv func(string) string) (Lambda, error) {
	var c Lambda
	src := envSource(getenv)
	if err := read(&c, lambdaSettings, src); err != nil {
		return c, err
	}
	var err error
	if c.MCP, err = mcpFromEnv(getenv); err != nil {
		return c, err
	}
	c.Common, err = readCommon(src)
	return c, err
}

// duration parses a positive Go duration; "" is def.
func duration(v string, def time.Duration) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a positive Go duration such as 24h", v)
	}
	return d, nil
}

// positive parses an integer of at least 1; "" is 0, the default of the
// package that bounds the setting.
func positive(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 1 {
		return 0, fmt.Errorf("%q is not a positive integer", v)
	}
	return i, nil
}

// integer parses an integer from lo to hi; "" is def.
func integer(v string, def, lo, hi int) (int, error) {
	if v == "" {
		return def, nil
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < lo || i > hi {
		return 0, fmt.Errorf("%q is not an integer from %d to %d", v, lo, hi)
	}
	return i, nil
}

// Local is the local server's configuration file.
type Local struct {
	Common
	Listen         string
	MetricsListen  string // "" means no metrics listener
	Store          StoreSettings
	HookKey        string
	InsecureNoAuth bool
	Users          map[string]User
	Delivery       *Destination // nil: no destination, tickets are not delivered
	MCP            MCP          // the file's "mcp" object; off when absent
	// Dir is the folder of the file LoadFile read, as its path was given
	// ("" after ParseFile): the owners of the paths the file names
	// (store.path, mcp.dev_key) take a relative one from it, as most
	// servers read the paths in their configuration, so a program opens
	// the same files whatever folder it is started from.
	Dir string
}

// StoreSettings chooses the local server's store. Their checks and
// defaults are the local store's (localstore.CheckSettings).
type StoreSettings struct {
	Kind     string `json:"kind"`     // sqlite (the default) or dynamodb
	Path     string `json:"path"`     // sqlite
	Table    string `json:"table"`    // dynamodb
	Endpoint string `json:"endpoint"` // dynamodb, e.g. DynamoDB Local
	Region   string `json:"region"`   // dynamodb; when empty, the AWS SDK's chain (AWS_REGION, AWS_DEFAULT_REGION, the profile)
}

// User is one entry of the file's users.
type User struct {
	TenantID string `json:"tenant_id"`
	UserID   string `json:"user_id"`
	Disabled bool   `json:"disabled"`
}

// localFile is the file's own members; the shared ones are read through
// commonSettings (see splitFile).
type localFile struct {
	Listen         string          `json:"listen"`
	MetricsListen  string          `json:"metrics_listen"`
	Store          StoreSettings   `json:"store"`
	HookKey        string          `json:"hook_key"`
	InsecureNoAuth bool            `json:"insecure_no_auth"`
	Users          map[string]User `json:"users"`
	Delivery       *Destination    `json:"delivery"`
	MCP            *MCP            `json:"mcp"`
}

// splitFile decodes one JSON value of the file: the members of
// commonSettings into a source, the rest into a localFile, where an unknown
// member is an error.
func splitFile(raw json.RawMessage) (localFile, source, error) {
	var f localFile
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return f, source{}, errors.New("the file must hold one JSON object")
	}
	shared := make(map[string]json.RawMessage, len(commonSettings))
	for _, s := range commonSettings {
		if v, ok := members[s.file]; ok {
			shared[s.file] = v
			delete(members, s.file)
		}
	}
	rest, err := json.Marshal(members)
	if err != nil {
		return f, source{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(rest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return f, source{}, err
	}
	return f, source{
		name:  func(k key) string { return k.file },
		value: func(k key) (string, error) { return fileValue(shared[k.file], k.number) },
	}, nil
}

// fileValue is the text of a member: a JSON string's contents, or a number
// as written (a string holding a number is accepted for a number, as
// json.Number accepts it). An absent member or null is "", the default.
func fileValue(raw json.RawMessage, number bool) (string, error) {
	if raw == nil || string(raw) == "null" {
		return "", nil
	}
	if number {
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return "", errors.New("must be a JSON number")
		}
		return n.String(), nil
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", errors.New("must be a JSON string")
	}
	return v, nil
}

// LoadFile reads the local configuration file with ParseFile and records
// its folder in Dir, against which the owners of file paths resolve
// relative ones (localstore.CheckSettings for store.path,
// localserver.CheckSettings for mcp.dev_key).
func LoadFile(path string) (Local, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Local{}, fmt.Errorf("config: %w", err)
	}
	c, err := ParseFile(b)
	c.Dir = filepath.Dir(path)
	return c, err
}

// ParseFile maps the local configuration's names to values and checks
// what this package owns (listeners, hook_key against insecure_no_auth,
// the users' ids, the MCP and delivery blocks' fields). Unknown fields are
// errors, so a typo does not silently fall back to a default. The store
// block and the file paths are checked by their owners:
// localserver.CheckSettings runs every owner's check.
func ParseFile(b []byte) (Local, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return Local{}, errors.New("config: the file is empty; start from config.example.json")
	}
	var first, next json.RawMessage
	var f localFile
	var src source
	dec := json.NewDecoder(bytes.NewReader(b))
	err := dec.Decode(&first)
	if err == nil {
		f, src, err = splitFile(first)
	}
	if err == nil { // a second value would be ignored silently, typos and all
		if err = dec.Decode(&next); err == nil {
			if _, _, err = splitFile(next); err == nil {
				err = errors.New("the file holds more than one JSON value")
			}
		} else if errors.Is(err, io.EOF) {
			err = nil
		}
	}
	if err != nil {
		return Local{}, fmt.Errorf("config: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	c := Local{Listen: f.Listen, MetricsListen: f.MetricsListen, Store: f.Store, HookKey: f.HookKey, InsecureNoAuth: f.InsecureNoAuth, Users: f.Users}
	if f.Delivery != nil {
		if err := f.Delivery.Validate(); err != nil {
			return c, err
		}
		c.Delivery = f.Delivery
	}
	if c.Common, err = readCommon(src); err != nil {
		return c, err
	}
	if f.MCP != nil {
		c.MCP = *f.MCP
	}
	if err := c.MCP.check(MCPFileNames); err != nil {
		return c, err
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	_, _, err = net.SplitHostPort(c.Listen)
	if err != nil {
		return c, fmt.Errorf("config: listen: %q is not host:port", c.Listen)
	}
	if c.MetricsListen, err = metricsListen(c.MetricsListen, c.Listen); err != nil {
		return c, err
	}
	switch {
	case c.HookKey != "" && c.InsecureNoAuth:
		return c, errors.New("config: insecure_no_auth: set either hook_key or insecure_no_auth, not both")
	}
	for id, u := range c.Users {
		if id == "" || u.TenantID == "" || u.UserID == "" {
			if q := strconv.Quote(id); q != `"`+id+`"` {
				id = q // keep the error on one line
			}
			return c, fmt.Errorf("config: users.%s: needs tenant_id and user_id", id)
		}
	}
	return c, nil
}

// metricsListen checks the Prometheus listener's address: absent means
// none, and an address without a host binds loopback. That any other host
// is loopback (/metrics has no authentication) is the local server's
// check, localserver.CheckSettings.
func metricsListen(addr, listen string) (string, error) {
	if addr == "" {
		return "", nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return "", fmt.Errorf("config: metrics_listen: %q is not host:port", addr)
	}
	if host == "" {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	if addr == listen {
		return "", fmt.Errorf("config: metrics_listen: %q is also listen; give metrics their own port", addr)
	}
	return addr, nil
}
