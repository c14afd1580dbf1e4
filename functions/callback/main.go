// Command callback is the AIVAX Protocol Function callback: a Lambda behind
// a function URL when AWS_LAMBDA_RUNTIME_API is set, otherwise a local HTTP
// server (go run ./functions/callback -config config.json), which also
// delivers tickets when the file has a delivery block. `-config FILE
// deliveries ...` is the operator's command on the same store (list, show,
// retry, resolve). This file only wires: read configuration once, build
// clients once, start.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/aivax-examples/idempotent-callback/internal/app"
	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/lambdaurl"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
)

func main() {
	if os.Getenv("AWS_LAMBDA_RUNTIME_API") != "" {
		runLambda()
		return
	}
	os.Exit(runLocal(os.Args[1:]))
}

func runLambda() {
	logger := app.LambdaLogger()
	cfg, err := config.FromEnv(os.Getenv)
	if err == nil {
		cfg.Deliver, err = config.DeliveryKindFromEnv(os.Getenv)
	}
	if err != nil {
		logger.Error("bad configuration", slog.Any("error", err))
		os.Exit(1)
	}
	h, err := app.LambdaHandler(context.Background(), cfg, logger)
	if err != nil {
		logger.Error("start failed", slog.Any("error", err))
		os.Exit(1)
	}
	lambda.Start(lambdaurl.Wrap(h))
}

func runLocal(args []string) int {
	fs := flag.NewFlagSet("callback", flag.ContinueOnError)
	path := fs.String("config", "config.json", "the local configuration file (docs/contract.md, Configuration: Local server)")
	printNonce := fs.Bool("nonce", false, "print a fresh X-Request-Nonce for the configured hook_key and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	cfg, err := config.LoadFile(*path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if fs.NArg() > 0 {
		if fs.Arg(0) != "deliveries" {
			fmt.Fprintf(os.Stderr, "unknown command %q; the one command is deliveries\n%s", fs.Arg(0), app.DeliveriesUsage)
			return 2
		}
		return app.Deliveries(context.Background(), cfg, fs.Args()[1:], os.Stdin, os.Stdout, os.Stderr)
	}
	if *printNonce {
		if cfg.HookKey == "" {
			fmt.Fprintln(os.Stderr, "config: hook_key: empty, so there is no nonce to make")
			return 1
		}
		n, err := nonce.Generate(cfg.HookKey, nonce.AIVAXCost)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(n)
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	h, closer, err := app.LocalHandler(ctx, cfg, logger)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = closer.Close() }()
	if err := app.Serve(ctx, cfg.Listen, h, logger, func(a net.Addr) {
		fmt.Fprintf(os.Stderr, "callback listening on http://%s/callback\n", a)
	}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
