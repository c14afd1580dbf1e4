// Package config reads the two configurations of SPEC section 7: the
// Lambda's environment variables and the local server's JSON file. Bad
// configuration is one error naming the field, so the program stops at
// start with one clear line.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/opkey"
)

// Common is what both configurations set.
type Common struct {
	Policy       opkey.Policy
	Retention    time.Duration
	MaxBodyBytes int64
	MinCost      int
	MaxCost      int
	PublicURL    string
}

// Lambda is the configuration of the deployed function.
type Lambda struct {
	Common
	TableName        string
	HookKeyParameter string // SSM SecureString name; wins over HookKey
	HookKey          string
	UserCacheTTL     time.Duration
	UserCacheSize    int
	CallTimeout      time.Duration
}

// Defaults.
const (
	DefaultRetention = 24 * time.Hour
	// MinRetention is the shortest deduplication window accepted: agents
	// retry within seconds to minutes, and template.yaml's pattern for
	// RETENTION admits nothing shorter either.
	MinRetention   = time.Minute
	DefaultListen  = "127.0.0.1:3210"
	DefaultMaxBody = 64 << 10
)

// FromEnv reads the Lambda configuration through getenv (os.Getenv).
func FromEnv(getenv func(string) string) (Lambda, error) {
	c := Lambda{
		TableName:        getenv("TABLE_NAME"),
		HookKeyParameter: getenv("HOOK_KEY_PARAMETER"),
		HookKey:          getenv("HOOK_KEY"),
	}
	if c.TableName == "" {
		return c, errors.New("config: TABLE_NAME is required")
	}
	var err error
	if c.Common, err = common(getenv("KEY_POLICY"), getenv("RETENTION"), getenv("MAX_BODY_BYTES"),
		getenv("NONCE_MIN_COST"), getenv("NONCE_MAX_COST"), getenv("PUBLIC_URL"), envNames); err != nil {
		return c, err
	}
	if len(c.HookKey) > nonce.MaxKeyLen {
		return c, fmt.Errorf("config: HOOK_KEY is %d bytes; BCrypt uses at most %d", len(c.HookKey), nonce.MaxKeyLen)
	}
	if c.UserCacheTTL, err = duration("USER_CACHE_TTL", getenv("USER_CACHE_TTL"), 60*time.Second); err != nil {
		return c, err
	}
	if c.UserCacheSize, err = integer("USER_CACHE_SIZE", getenv("USER_CACHE_SIZE"), 1024, 1, 1<<20); err != nil {
		return c, err
	}
	if c.CallTimeout, err = duration("STORE_CALL_TIMEOUT", getenv("STORE_CALL_TIMEOUT"), 2*time.Second); err != nil {
		return c, err
	}
	return c, nil
}

// names maps each common setting to how its configuration calls it.
type names struct{ policy, retention, maxBody, minCost, maxCost, publicURL string }

var (
	envNames  = names{"KEY_POLICY", "RETENTION", "MAX_BODY_BYTES", "NONCE_MIN_COST", "NONCE_MAX_COST", "PUBLIC_URL"}
	fileNames = names{"key_policy", "retention", "max_body_bytes", "nonce_min_cost", "nonce_max_cost", "public_url"}
)

func common(policy, retention, maxBody, minCost, maxCost, publicURL string, nm names) (Common, error) {
	var c Common
	var err error
	if c.Policy, err = opkey.ParsePolicy(policy); err != nil {
		return c, fmt.Errorf("config: %s: %w", nm.policy, err)
	}
	if c.Retention, err = duration(nm.retention, retention, DefaultRetention); err != nil {
		return c, err
	}
	if c.Retention < MinRetention {
		return c, fmt.Errorf("config: %s: %q is shorter than %s: a window that short deduplicates almost no retry", nm.retention, retention, MinRetention)
	}
	mb, err := integer(nm.maxBody, maxBody, DefaultMaxBody, 1024, 16<<20)
	if err != nil {
		return c, err
	}
	c.MaxBodyBytes = int64(mb)
	if c.MinCost, err = integer(nm.minCost, minCost, nonce.DefaultMinCost, 4, nonce.CapCost); err != nil {
		return c, err
	}
	if c.MaxCost, err = integer(nm.maxCost, maxCost, nonce.DefaultMaxCost, 4, nonce.CapCost); err != nil {
		return c, err
	}
	if c.MinCost > c.MaxCost {
		return c, fmt.Errorf("config: %s (%d) is above %s (%d)", nm.minCost, c.MinCost, nm.maxCost, c.MaxCost)
	}
	if publicURL != "" && !strings.HasPrefix(publicURL, "https://") && !strings.HasPrefix(publicURL, "http://") {
		return c, fmt.Errorf("config: %s: %q must start with https:// or http://", nm.publicURL, publicURL)
	}
	c.PublicURL = publicURL
	return c, nil
}

func duration(name, v string, def time.Duration) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("config: %s: %q is not a positive Go duration such as 24h", name, v)
	}
	return d, nil
}

func integer(name, v string, def, lo, hi int) (int, error) {
	if v == "" {
		return def, nil
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < lo || i > hi {
		return 0, fmt.Errorf("config: %s: %q is not an integer from %d to %d", name, v, lo, hi)
	}
	return i, nil
}

// Local is the local server's configuration file.
type Local struct {
	Common
	Listen         string
	Store          Store
	HookKey        string
	InsecureNoAuth bool
	Users          map[string]User
	Delivery       *Delivery // nil: no destination, tickets are not delivered
}

// Store chooses the local server's store.
type Store struct {
	Kind     string `json:"kind"`     // "sqlite" (default) or "dynamodb"
	Path     string `json:"path"`     // sqlite
	Table    string `json:"table"`    // dynamodb
	Endpoint string `json:"endpoint"` // dynamodb, e.g. DynamoDB Local
	Region   string `json:"region"`   // dynamodb, default us-east-1
}

// User is one entry of the file's users.
type User struct {
	TenantID string `json:"tenant_id"`
	UserID   string `json:"user_id"`
	Disabled bool   `json:"disabled"`
}

type localFile struct {
	Listen         string          `json:"listen"`
	Store          Store           `json:"store"`
	HookKey        string          `json:"hook_key"`
	InsecureNoAuth bool            `json:"insecure_no_auth"`
	KeyPolicy      string          `json:"key_policy"`
	Retention      string          `json:"retention"`
	MaxBodyBytes   json.Number     `json:"max_body_bytes"`
	NonceMinCost   json.Number     `json:"nonce_min_cost"`
	NonceMaxCost   json.Number     `json:"nonce_max_cost"`
	PublicURL      string          `json:"public_url"`
	Users          map[string]User `json:"users"`
	Delivery       *Delivery       `json:"delivery"`
}

// LoadFile reads and checks the local configuration file.
func LoadFile(path string) (Local, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Local{}, fmt.Errorf("config: %w", err)
	}
	return ParseFile(b)
}

// ParseFile checks the local configuration. Unknown fields are errors, so a
// typo does not silently fall back to a default.
func ParseFile(b []byte) (Local, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return Local{}, errors.New("config: the file is empty; start from config.example.json")
	}
	var f localFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(&f)
	if err == nil { // a second value would be ignored silently, typos and all
		if err = dec.Decode(&f); err == nil {
			err = errors.New("the file holds more than one JSON value")
		} else if errors.Is(err, io.EOF) {
			err = nil
		}
	}
	if err != nil {
		return Local{}, fmt.Errorf("config: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	c := Local{Listen: f.Listen, Store: f.Store, HookKey: f.HookKey, InsecureNoAuth: f.InsecureNoAuth, Users: f.Users}
	if f.Delivery != nil {
		if err := f.Delivery.Validate(); err != nil {
			return c, err
		}
		c.Delivery = f.Delivery
	}
	if c.Common, err = common(f.KeyPolicy, f.Retention, f.MaxBodyBytes.String(), f.NonceMinCost.String(),
		f.NonceMaxCost.String(), f.PublicURL, fileNames); err != nil {
		return c, err
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return c, fmt.Errorf("config: listen: %q is not host:port", c.Listen)
	}
	switch c.Store.Kind {
	case "", "sqlite":
		c.Store.Kind = "sqlite"
		if c.Store.Path == "" {
			c.Store.Path = "tickets.sqlite"
		}
	case "dynamodb":
		if c.Store.Table == "" {
			return c, errors.New("config: store.table is required when store.kind is dynamodb")
		}
		if c.Store.Region == "" {
			c.Store.Region = "us-east-1"
		}
	default:
		return c, fmt.Errorf("config: store.kind: %q is neither sqlite nor dynamodb", c.Store.Kind)
	}
	switch {
	case len(c.HookKey) > nonce.MaxKeyLen:
		return c, fmt.Errorf("config: hook_key is %d bytes; BCrypt uses at most %d", len(c.HookKey), nonce.MaxKeyLen)
	case c.HookKey != "" && c.InsecureNoAuth:
		return c, errors.New("config: insecure_no_auth: set either hook_key or insecure_no_auth, not both")
	case c.InsecureNoAuth && !isLoopback(host):
		return c, fmt.Errorf("config: insecure_no_auth: only allowed when listen is a loopback address, not %q", c.Listen)
	}
	for id, u := range c.Users {
		if len(id) > core.MaxExternalUserIDLen {
			// The service refuses such an id before any lookup.
			return c, fmt.Errorf("config: users: an id of %d bytes; at most %d", len(id), core.MaxExternalUserIDLen)
		}
		if id == "" || u.TenantID == "" || u.UserID == "" {
			if q := strconv.Quote(id); q != `"`+id+`"` {
				id = q // keep the error on one line
			}
			return c, fmt.Errorf("config: users.%s: needs tenant_id and user_id", id)
		}
	}
	return c, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
