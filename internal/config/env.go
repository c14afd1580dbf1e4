package config

import (
	"log/slog"
	"os"
)

// Env reads the process environment: the one place the product does.
// Tests give FromEnv and DeliveryFromEnv a map's lookup instead.
func Env(name string) string { return os.Getenv(name) }

// InLambda reports whether the process runs in Lambda (the runtime sets
// AWS_LAMBDA_RUNTIME_API), through getenv.
func InLambda(getenv func(string) string) bool {
	return getenv("AWS_LAMBDA_RUNTIME_API") != ""
}

// LogLevel is the deployed functions' log level, AWS_LAMBDA_LOG_LEVEL
// through getenv (Lambda's advanced logging controls set it); INFO when it
// is unset or not a level.
func LogLevel(getenv func(string) string) slog.Level {
	var l slog.Level
	if l.UnmarshalText([]byte(getenv("AWS_LAMBDA_LOG_LEVEL"))) != nil {
		return slog.LevelInfo
	}
	return l
}
