package localstore

import (
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// TestMain stops the DynamoDB Local that testenv starts.
func TestMain(m *testing.M) { testenv.Main(m) }
