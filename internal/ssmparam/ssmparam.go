// Package ssmparam reads the SSM SecureString parameters the functions
// take their secrets from (the hook key, the helpdesk's credentials), once
// at cold start.
package ssmparam

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// Timeout bounds one read.
const Timeout = 5 * time.Second

// Getter is the part of the SSM client Read uses.
type Getter interface {
	GetParameter(context.Context, *ssm.GetParameterInput, ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// ErrEmpty: the parameter holds nothing.
var ErrEmpty = errors.New("empty value")

// Read returns the decrypted value of parameter name, used exactly as
// stored except for one trailing line break ("\n" or "\r\n"), which
// `aws ssm put-parameter --value file://…` stores with a file's last line.
// The value never appears in an error.
func Read(ctx context.Context, c Getter, name string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	out, err := c.GetParameter(ctx, &ssm.GetParameterInput{Name: &name, WithDecryption: aws.Bool(true)})
	if err != nil {
		return "", err
	}
	if out.Parameter == nil || out.Parameter.Value == nil {
		return "", ErrEmpty
	}
	v, found := strings.CutSuffix(*out.Parameter.Value, "\n")
	if found {
		v = strings.TrimSuffix(v, "\r")
	}
	if v == "" {
		return "", ErrEmpty
	}
	return v, nil
}
