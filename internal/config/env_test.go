package config

import (
	"log/slog"
	"testing"
)

func TestLambdaLevel(t *testing.T) {
	for in, want := range map[string]slog.Level{"": slog.LevelInfo, "DEBUG": slog.LevelDebug, "WARN": slog.LevelWarn,
		"ERROR": slog.LevelError, "TRACE": slog.LevelInfo, "nonsense": slog.LevelInfo} {
		if got := LogLevel(env(map[string]string{"AWS_LAMBDA_LOG_LEVEL": in})); got != want {
			t.Errorf("LogLevel(AWS_LAMBDA_LOG_LEVEL=%q) = %v, want %v", in, got, want)
		}
	}
}

func TestInLambda(t *testing.T) {
	if InLambda(env(nil)) || !InLambda(env(map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"})) {
		t.Error("InLambda should follow AWS_LAMBDA_RUNTIME_API")
	}
}
