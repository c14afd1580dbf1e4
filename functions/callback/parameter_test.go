package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// tableWithUserA creates a table on DynamoDB Local at endpoint holding
// user-a (tenant-a, alice), the user the tests' callbacks name.
func tableWithUserA(t *testing.T, endpoint string) string {
	t.Helper()
	table := testenv.CreateTable(t, endpoint)
	seed := dynamo.New(testenv.DynamoClient(t, endpoint), table, dynamo.Options{CallTimeout: 10 * time.Second})
	if err := seed.PutUser(context.Background(), core.User{ExternalID: "user-a", TenantID: "tenant-a", UserID: "alice"}); err != nil {
		t.Fatal(err)
	}
	return table
}

// fakeSSM records the GetParameter input and answers out or err.
type fakeSSM struct {
	in  *ssm.GetParameterInput
	out *ssm.GetParameterOutput
	err error
}

func (f *fakeSSM) GetParameter(_ context.Context, in *ssm.GetParameterInput, _ ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	f.in = in
	return f.out, f.err
}

func paramOut(v *string) *ssm.GetParameterOutput {
	return &ssm.GetParameterOutput{Parameter: &ssmtypes.Parameter{Value: v}}
}

func TestReadParameter(t *testing.T) {
	const name = "/aivax/hook-key"
	tests := []struct {
		name    string
		fake    *fakeSSM
		want    string
		wantErr string // substring of the error; empty: no error
	}{
		{"SecureString value -> the value", &fakeSSM{out: paramOut(aws.String("secret-key"))}, "secret-key", ""},
		{"empty value -> error naming the parameter", &fakeSSM{out: paramOut(aws.String(""))}, "", "empty value"},
		{"nil value -> error naming the parameter", &fakeSSM{out: paramOut(nil)}, "", "empty value"},
		{"no parameter -> error naming the parameter", &fakeSSM{out: &ssm.GetParameterOutput{}}, "", "empty value"},
		{"SSM error -> error naming the parameter and wrapping it", &fakeSSM{err: errors.New("AccessDeniedException")}, "", "AccessDeniedException"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readParameter(context.Background(), tc.fake, name)
			if tc.fake.in == nil {
				t.Fatal("GetParameter not called")
			}
			if aws.ToString(tc.fake.in.Name) != name {
				t.Errorf("asked for %q, want %q", aws.ToString(tc.fake.in.Name), name)
			}
			if !aws.ToBool(tc.fake.in.WithDecryption) {
				t.Error("WithDecryption is not true: a SecureString would come back encrypted")
			}
			if tc.wantErr == "" {
				if err != nil || got != tc.want {
					t.Fatalf("got %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %q and no error, want one containing %q", got, tc.wantErr)
			}
			for _, w := range []string{name, "HOOK_KEY_PARAMETER", tc.wantErr} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q discloses the value", err)
			}
		})
	}
}

func TestReadParameterTimeout(t *testing.T) {
	var deadline time.Time
	var ok bool
	f := ssmFunc(func(ctx context.Context) { deadline, ok = ctx.Deadline() })
	_, _ = readParameter(context.Background(), f, "p")
	if !ok || time.Until(deadline) > 5*time.Second {
		t.Errorf("deadline %v (set %v), want one within 5s", deadline, ok)
	}
}

type ssmFunc func(context.Context)

func (f ssmFunc) GetParameter(ctx context.Context, _ *ssm.GetParameterInput, _ ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	f(ctx)
	return paramOut(aws.String("k")), nil
}

// The hook key is used exactly as stored in SSM, except for the one line
// break `aws ssm put-parameter --value file://…` leaves at its end.
func TestHookKeyTrailingNewline(t *testing.T) {
	for stored, want := range map[string]string{
		"key\n":        "key",
		"key\r\n":      "key",
		"key":          "key",
		"key \n":       "key ",
		" key\t":       " key\t",
		"key\n\n":      "key\n",
		"k\ney\n":      "k\ney",
		"key\r":        "key\r",
		"multi word\n": "multi word",
	} {
		got, err := readParameter(context.Background(), &fakeSSM{out: paramOut(aws.String(stored))}, "/p")
		if err != nil || got != want {
			t.Errorf("stored %q: got %q, %v; want %q", stored, got, err, want)
		}
	}
	for _, stored := range []string{"\n", "\r\n"} {
		if got, err := readParameter(context.Background(), &fakeSSM{out: paramOut(aws.String(stored))}, "/p"); err == nil {
			t.Errorf("stored %q: got %q, want the empty-value error", stored, got)
		}
	}
}
