// Package doors builds the callback's HTTP side, shared by the two
// programs that serve it (the callback function and the local server):
// the service on a store and users, the AIVAX door (httpapi.Handler) with
// its authenticator, and the MCP door beside it. It links no helpdesk
// client and no operator code.
package doors

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/jwtauth"
	"github.com/aivax-examples/idempotent-callback/internal/mcpdoor"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/tracing"
)

// Settings are the callback's shared settings and its hook key, checked by
// CheckSettings: the key policy parsed, the nonce costs defaulted and in
// range, the hook key one BCrypt uses whole. Build and Authenticator take
// them as they are and check none of them again.
type Settings struct {
	Policy       idem.Policy
	Retention    time.Duration
	MaxBodyBytes int64 // 0: httpapi.DefaultMaxBody
	PublicURL    string
	HookKey      string // "": no key (Authenticator refuses every callback)
	MinCost      int
	MaxCost      int
}

// CheckSettings checks the shared settings c and the hook key by the rules
// of the packages that apply them (idem for the key policy, nonce for the
// hook key and the cost range), with the nonce costs' defaults set, and
// names a refused setting as names does: config.SettingEnvNames or
// config.SettingFileNames. The composition roots call it once, right
// after reading the configuration, so a bad value stops the program at
// start, and carry what it returns.
func CheckSettings(c config.Common, hookKey string, names config.SettingNames) (Settings, error) {
	policy, err := idem.ParsePolicy(c.Policy)
	if err != nil {
		return Settings{}, fmt.Errorf("config: %s: %w", names.Policy, err)
	}
	s := nonce.Settings{HookKey: hookKey, MinCost: c.MinCost, MaxCost: c.MaxCost}
	if err := s.CheckAndSetDefaults(); err != nil {
		var se *nonce.SettingError
		if !errors.As(err, &se) {
			return Settings{}, fmt.Errorf("config: %w", err)
		}
		if errors.Is(se.Err, nonce.ErrCostOrder) {
			return Settings{}, fmt.Errorf("config: %s (%d) is above %s (%d)", names.MinCost, s.MinCost, names.MaxCost, s.MaxCost)
		}
		name := map[string]string{nonce.FieldHookKey: names.HookKey, nonce.FieldMinCost: names.MinCost, nonce.FieldMaxCost: names.MaxCost}[se.Field]
		return Settings{}, fmt.Errorf("config: %s: %w", name, se.Err)
	}
	return Settings{
		Policy: policy, Retention: c.Retention, MaxBodyBytes: c.MaxBodyBytes, PublicURL: c.PublicURL,
		HookKey: hookKey, MinCost: s.MinCost, MaxCost: s.MaxCost,
	}, nil
}

// CheckHookKey checks a hook key read after the other settings (the
// callback function's SSM parameter) by nonce's rule, naming it name, and
// returns it for Settings.HookKey.
func CheckHookKey(key, name string) (string, error) {
	if err := nonce.CheckKey(key); err != nil {
		return "", fmt.Errorf("config: %s: %w", name, err)
	}
	return key, nil
}

// mcpKeys is where the door's verification keys come from: the local
// development issuer's own key, or the issuer's JWK Set (jwks_url, or
// discovered), fetched on first use.
func mcpKeys(m config.MCP) (jwtauth.KeySource, error) {
	if m.DevKey != "" {
		dev, err := jwtauth.LoadDevIssuer(m.DevKey, m.Issuer)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		return dev.Keys(), nil
	}
	return &jwtauth.Keys{Issuer: m.Issuer, JWKSURL: m.JWKSURL}, nil
}

// withMCP builds the MCP door on svc (the callback's service, so both
// doors share keys and transaction) and routes its paths to it, the rest
// to h. With the door off, h alone: its paths are 404 there.
func withMCP(h http.Handler, m config.MCP, names config.MCPNames, svc *core.Service, maxBody int64, rec metrics.Recorder, logger *slog.Logger) (http.Handler, error) {
	if !m.On() {
		return h, nil
	}
	if err := CheckMCP(m, names); err != nil {
		return nil, err
	}
	keys, err := mcpKeys(m)
	if err != nil {
		return nil, err
	}
	door, err := mcpdoor.New(mcpdoor.Config{
		Service:  svc,
		Users:    svc.Users,
		Verifier: &jwtauth.Verifier{Issuer: m.Issuer, Audience: m.Audience, UserClaim: m.UserClaim, Keys: keys},
		Issuer:   m.Issuer,
		Audience: m.Audience,
		Scopes:   m.Scopes.List(),
		MaxBody:  maxBody,
		Logger:   logger,
		Metrics:  rec,
	})
	if err != nil {
		return nil, err
	}
	logger.Info("MCP door on", slog.String("path", mcpdoor.Path), slog.String("issuer", m.Issuer), slog.String("audience", m.Audience))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mcpdoor.Handles(r.URL.Path) {
			door.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}), nil
}

// Config is what both callback programs give Build.
type Config struct {
	Store core.Store
	Users core.Users
	// Settings are the shared settings, checked (CheckSettings).
	Settings Settings
	MCP      config.MCP
	// MCPNames name the door's settings in errors: config.MCPEnvNames or
	// config.MCPFileNames.
	MCPNames config.MCPNames
	Auth     httpapi.Authenticator
	Deliver  bool // each new ticket is written pending (the outbox)
	// Tools are the tools both doors serve; nil: the product's
	// (core.Functions).
	Tools *core.Tools
	// ResultCache is the service's cache of completed operations
	// (core.Service.Cache), shared by both doors; nil: none.
	ResultCache *idem.Cache
	Metrics     metrics.Recorder
	Logger      *slog.Logger
}

// DefaultResultCacheSize is how many completed operations the callback
// function keeps in memory by default (RESULT_CACHE_SIZE unset). A
// create_ticket record held takes about 550 bytes, so 4096 take about
// 2.1 MiB, under 2 % of a 128 MB function (idem's BenchmarkCacheMemory).
const DefaultResultCacheSize = 4096

// ResultCache is the cache of completed operations for a configured size
// (config.Lambda.ResultCacheSize): DefaultResultCacheSize entries for 0,
// none for a negative size (config.ResultCacheOff).
func ResultCache(size int) *idem.Cache {
	if size < 0 {
		return nil
	}
	return idem.NewCache(cmp.Or(size, DefaultResultCacheSize))
}

// Build is the callback's graph on c.Store, outermost first: the MCP door
// (when c.MCP is on) beside httpapi.Handler → core.Service → c.Store;
// both doors share the service, so they share keys and transaction. The
// caller wraps the store and the handler with its own metrics.
func Build(c Config) (http.Handler, error) {
	svc := &core.Service{
		Store:     c.Store,
		Users:     c.Users,
		Policy:    c.Settings.Policy,
		Retention: c.Settings.Retention,
		NewID:     uuid.NewString,
		Deliver:   c.Deliver,
		Tools:     c.Tools,
		Cache:     c.ResultCache,
		// The ticket's delivery links to the call's span.
		Traceparent: tracing.Traceparent,
	}
	// A misconfigured service (retention, result cache, id source) stops
	// the program here, not on every write.
	if err := svc.Check(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return withMCP(&httpapi.Handler{
		Service:   svc,
		Auth:      c.Auth,
		MaxBody:   c.Settings.MaxBodyBytes,
		Logger:    c.Logger,
		PublicURL: c.Settings.PublicURL,
		Metrics:   c.Metrics,
	}, c.MCP, c.MCPNames, svc, c.Settings.MaxBodyBytes, c.Metrics, c.Logger)
}

// Authenticator checks nonces against s.HookKey and s's cost range. It
// fails closed: no hook key and no explicit insecure switch means every
// callback is refused.
func Authenticator(s Settings, insecure bool, logger *slog.Logger) (httpapi.Authenticator, error) {
	switch {
	case insecure:
		logger.Warn("insecure_no_auth is set: callbacks are NOT authenticated; use this only on loopback")
		return nonce.Off{}, nil
	case s.HookKey == "":
		logger.Error("no hook key configured: every callback is refused (fail closed)")
		return nonce.Refuse{}, nil
	}
	v, err := nonce.New(s.HookKey, s.MinCost, s.MaxCost)
	if err != nil {
		return nil, fmt.Errorf("hook key: %w", err)
	}
	return v, nil
}

// CheckMCP checks the door's URLs by jwtauth's rules, naming the setting
// by names: the issuer and the JWK Set are https (http only on
// loopback), and the development issuer (dev_key) needs a loopback
// issuer.
func CheckMCP(m config.MCP, names config.MCPNames) error {
	if err := jwtauth.CheckURL(m.Issuer); err != nil {
		return fmt.Errorf("config: %s: %w", names.Issuer, err)
	}
	if m.JWKSURL != "" {
		if err := jwtauth.CheckURL(m.JWKSURL); err != nil {
			return fmt.Errorf("config: %s: %w", names.JWKSURL, err)
		}
	}
	if m.DevKey != "" && !jwtauth.Loopback(m.Issuer) {
		return fmt.Errorf("config: %s: the development issuer needs a loopback %s, not %q", names.DevKey, names.Issuer, m.Issuer)
	}
	return nil
}
