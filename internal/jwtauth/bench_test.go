package jwtauth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/aivax-examples/idempotent-callback/internal/jwtauth"
)

// BenchmarkVerify: one access token verified with its key already cached
// (the JWK Set loaded): what the MCP door spends per request on the token,
// beside the callback's BCrypt (BenchmarkVerify, internal/nonce).
func BenchmarkVerify(b *testing.B) {
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	for _, c := range []struct {
		name   string
		method jwt.SigningMethod
		priv   any
		pub    any
	}{{"ES256", jwt.SigningMethodES256, ek, &ek.PublicKey}, {"RS256", jwt.SigningMethodRS256, rk, &rk.PublicKey}} {
		b.Run(c.name, func(b *testing.B) {
			v := &jwtauth.Verifier{Issuer: "https://issuer.example", Audience: "https://tickets.example/mcp", UserClaim: "sub",
				Keys: jwtauth.StaticKey{KID: "k", Alg: c.method.Alg(), Public: c.pub}, Now: func() time.Time { return now }}
			tok := jwt.NewWithClaims(c.method, jwt.MapClaims{"iss": v.Issuer, "aud": v.Audience, "sub": "user-a",
				"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
			tok.Header["kid"] = "k"
			raw, err := tok.SignedString(c.priv)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(ctx, raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
