package config_test

import (
	"cmp"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/app/doors"
	"github.com/aivax-examples/idempotent-callback/internal/app/localstore"
	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/deliverylambda"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/usercache"
)

// effective is c as the graph the composition root builds from it sees
// it: each zero setting is the default of the package that applies it.
func effective(t *testing.T, c config.Lambda) config.Lambda {
	t.Helper()
	var err error
	if c.Common, err = checkCommon(c.Common, c.HookKey, config.SettingEnvNames); err != nil {
		t.Fatal(err)
	}
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, httpapi.DefaultMaxBody)
	c.UserCacheTTL = cmp.Or(c.UserCacheTTL, usercache.DefaultTTL)
	c.UserCacheSize = cmp.Or(c.UserCacheSize, usercache.DefaultSize)
	c.ResultCacheSize = cmp.Or(c.ResultCacheSize, doors.DefaultResultCacheSize)
	c.CallTimeout = cmp.Or(c.CallTimeout, dynamo.DefaultCallTimeout)
	c.MetricsNamespace = cmp.Or(c.MetricsNamespace, metrics.DefaultNamespace)
	return c
}

func lookup(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// TestDefaultsAreTheOwners: with nothing but TABLE_NAME set, the
// configuration in effect is the documented one, each default applied by
// the package that owns it; the local file's body limit is httpapi's
// too, its store block's the local store's, and the destination's
// defaults the engine's, the clients' and the sweep's.
func TestDefaultsAreTheOwners(t *testing.T) {
	c, err := config.FromEnv(lookup(map[string]string{"TABLE_NAME": "tickets"}))
	if err != nil {
		t.Fatal(err)
	}
	want := config.Lambda{
		Common: config.Common{
			Policy: string(idem.PolicyArguments), Retention: 24 * time.Hour, MaxBodyBytes: 64 << 10,
			MinCost: 4, MaxCost: 10,
		},
		TableName: "tickets", UserCacheTTL: 60 * time.Second, UserCacheSize: 1024, ResultCacheSize: 4096, CallTimeout: 2 * time.Second,
		MetricsNamespace: "AIVAX/Callback",
	}
	if got := effective(t, c); got != want {
		t.Errorf("defaults:\n got %+v\nwant %+v", got, want)
	}
	local, err := config.ParseFile([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := cmp.Or(local.MaxBodyBytes, httpapi.DefaultMaxBody); got != 64<<10 {
		t.Errorf("local max_body_bytes: %d, want %d", got, 64<<10)
	}
	store, err := localstore.CheckSettings(local.Store, local.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := (config.StoreSettings{Kind: "sqlite", Path: "tickets.sqlite"}); store.Block() != want {
		t.Errorf("local store:\n got %+v\nwant %+v", store.Block(), want)
	}
	d, err := config.DeliveryFromEnv(lookup(map[string]string{"TABLE_NAME": "t", "DELIVERY_KIND": "zendesk",
		"DELIVERY_URL": "https://acme.zendesk.com", "DELIVERY_SECRET": `{"email":"agent@acme.com","token":"tok-123"}`}))
	if err != nil {
		t.Fatal(err)
	}
	if got := cmp.Or(d.MetricsNamespace, metrics.DefaultNamespace); got != "AIVAX/Callback" {
		t.Errorf("delivery METRICS_NAMESPACE: %q", got)
	}
	dst := d.Destination
	if a, tm, sc := cmp.Or(dst.MaxAttempts, delivery.DefaultMaxAttempts), cmp.Or(dst.Timeout, delivery.DefaultCallTimeout),
		cmp.Or(dst.SweepConcurrency, deliverylambda.DefaultSweepConcurrency); a != 8 || tm != 10*time.Second || sc != 32 {
		t.Errorf("delivery defaults: max attempts %d, timeout %s, sweep concurrency %d; want 8, 10s, 32", a, tm, sc)
	}
}
