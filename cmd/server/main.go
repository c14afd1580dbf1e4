// Command server is the local server, what make run starts: the callback
// (and the MCP door when configured) served over HTTP on the configured
// store (go run ./cmd/server -config config.json), which also delivers
// tickets when the file has a delivery block. -nonce prints a fresh
// X-Request-Nonce and -mcp-token USER a development MCP token, then exit.
// This file only wires: configuration, then internal/app/localserver.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/aivax-examples/idempotent-callback/internal/app/localserver"
	"github.com/aivax-examples/idempotent-callback/internal/config"
)

func main() {
	path := flag.String("config", "config.json", "the local configuration file (docs/contract.md, Configuration: Local server)")
	printNonce := flag.Bool("nonce", false, "print a fresh X-Request-Nonce for the configured hook_key and exit")
	mcpTokenFor := flag.String("mcp-token", "", "print an MCP access token for this configured user, signed by the development issuer (mcp.dev_key), and exit")
	flag.Parse()
	cfg, err := config.LoadFile(*path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(localserver.Main(cfg, localserver.Mode{Nonce: *printNonce, MCPTokenFor: *mcpTokenFor, Args: flag.Args()}))
}
