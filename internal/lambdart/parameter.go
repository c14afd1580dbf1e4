package lambdart

// ReadParameter reads the SSM SecureString parameters the functions take
// their secrets from (HOOK_KEY_PARAMETER, DELIVERY_SECRET_PARAMETER), once
// at cold start.

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// ParameterTimeout bounds one ReadParameter.
const ParameterTimeout = 5 * time.Second

// ParameterGetter is the part of the SSM client ReadParameter uses.
type ParameterGetter interface {
	GetParameter(context.Context, *ssm.GetParameterInput, ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// ErrEmptyParameter: the parameter holds nothing.
var ErrEmptyParameter = errors.New("empty value")

// ReadParameter returns the decrypted value of parameter name, used exactly as
// stored except for one trailing line break ("\n" or "\r\n"), which
// `aws ssm put-parameter --value file://…` stores with a file's last line.
// The value never appears in an error.
func ReadParameter(ctx context.Context, c ParameterGetter, name string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, ParameterTimeout)
	defer cancel()
	out, err := c.GetParameter(ctx, &ssm.GetParameterInput{Name: &name, WithDecryption: aws.Bool(true)})
	if err != nil {
		return "", err
	}
	if out.Parameter == nil || out.Parameter.Value == nil {
		return "", ErrEmptyParameter
	}
	v, found := strings.CutSuffix(*out.Parameter.Value, "\n")
	if found {
		v = strings.TrimSuffix(v, "\r")
	}
	if v == "" {
		return "", ErrEmptyParameter
	}
	return v, nil
}
