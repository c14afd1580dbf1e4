// Package testenv gives tests of other packages the local services they need:
// a DynamoDB Local endpoint and the path of the Lambda Runtime Interface
// Emulator (aws-lambda-rie). Both are installed under <repo>/.cache by
// `make tools`.
//
// A test binary that calls [DynamoDB] should have
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// so the DynamoDB Local process it starts is stopped when the tests end (on
// Linux the process is also killed when the test binary dies).
//
// When a tool is missing the test is skipped, except under CI=true, where it
// fails: CI can never skip these tests silently.
//
// DynamoDB Local is started once per test binary, in memory, with -sharedDb
// (every access key and region sees the same tables), on a free loopback port.
// Set DYNAMODB_ENDPOINT to use an endpoint that is already running instead.
//
// # aws-lambda-rie
//
// Use [StartRIE]: it runs the emulator with a built bootstrap on free
// loopback ports, with an environment built from scratch, and returns the
// invoke URL (POST the event, read the function's result) and the
// emulator's output. The first invoke starts the bootstrap. For init time,
// read the line "INIT REPORT(durationMs: N)" from that output: the first
// REPORT line's "Init Duration" only times the emulator's own bookkeeping.
// The emulator's flags and behaviour are documented at
// https://github.com/aws/aws-lambda-runtime-interface-emulator.
package testenv
