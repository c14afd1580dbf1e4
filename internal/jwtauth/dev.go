package jwtauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// DevIssuer is the local server's development issuer: an ES256 key made
// on first start into a file beside the configuration (mode 0600, never
// sent anywhere), whose public key is the MCP door's only key and which
// signs the tokens -mcp-token prints.
type DevIssuer struct {
	Issuer string
	Key    *ecdsa.PrivateKey
	KID    string // derived from the public key, so a new key gets a new kid
}

// LoadDevIssuer reads the key file at path, or makes it when it does not
// exist.
func LoadDevIssuer(path, issuer string) (*DevIssuer, error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if b, err = newDevKeyFile(path); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("mcp.dev_key: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("mcp.dev_key: %s holds no PEM private key; delete it to make a new one", path)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	key, ok := parsed.(*ecdsa.PrivateKey)
	if err != nil || !ok || key.Curve != elliptic.P256() {
		return nil, fmt.Errorf("mcp.dev_key: %s is not a P-256 key; delete it to make a new one", path)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("mcp.dev_key: %w", err)
	}
	sum := sha256.Sum256(pub)
	return &DevIssuer{Issuer: issuer, Key: key, KID: "dev-" + base64.RawURLEncoding.EncodeToString(sum[:9])}, nil
}

func newDevKeyFile(path string) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	// O_EXCL: two processes starting at once do not overwrite each
	// other's key; the loser reads the winner's.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("mcp.dev_key: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("mcp.dev_key: %w", err)
	}
	return b, f.Close()
}

// Keys is the issuer's one key, for the Verifier.
func (d *DevIssuer) Keys() StaticKey {
	return StaticKey{KID: d.KID, Alg: jwt.SigningMethodES256.Alg(), Public: &d.Key.PublicKey}
}

// Token signs an access token naming user in userClaim, with audience and
// scopes, valid for ttl from now.
func (d *DevIssuer) Token(userClaim, user, audience string, scopes []string, now time.Time, ttl time.Duration) (string, error) {
	claims := jwt.MapClaims{
		"iss": d.Issuer, "aud": audience,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(ttl).Unix(),
	}
	claims[userClaim] = user
	if len(scopes) > 0 {
		claims["scope"] = strings.Join(scopes, " ")
	}
	t := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	t.Header["kid"] = d.KID
	return t.SignedString(d.Key)
}
