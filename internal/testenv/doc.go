// Package testenv gives tests of other packages the local services they need:
// a DynamoDB Local endpoint and the path of the Lambda Runtime Interface
// Emulator (aws-lambda-rie). Both are installed under <repo>/.cache by
// scripts/tools.sh (`make tools`).
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
// Flags (github.com/jessevdk/go-flags; unknown flags are ignored, and there is
// no --help: it would be taken as the bootstrap to run):
//
//	--runtime-interface-emulator-address HOST:PORT  invoke API (default 0.0.0.0:8080)
//	--runtime-api-address HOST:PORT                 Lambda Runtime API given to the
//	                                                function as AWS_LAMBDA_RUNTIME_API
//	                                                (default 127.0.0.1:9001)
//	--log-level LEVEL                               or env LOG_LEVEL
//
// The remaining arguments are the bootstrap command (if more than one, the last
// is taken as the handler name). Set both addresses to ports from [FreePort] so
// tests can run in parallel. The function's environment is the emulator's own
// environment. Invoke with
//
//	POST http://HOST:PORT/2015-03-31/functions/function/invocations
//
// with the event as the body; the response body is the function's result.
// The first invoke starts the bootstrap (init is lazy). The function's stdout
// and stderr, and the emulator's START/END/REPORT lines, go to the emulator's
// stdout; its own [INFO] logs go to stderr. The first REPORT line carries
// "Init Duration: N ms" (later ones do not):
//
//	REPORT RequestId: <uuid>\tInit Duration: 0.08 ms\tDuration: 13.84 ms\tBilled Duration: 14 ms\tMemory Size: 3008 MB\tMax Memory Used: 3008 MB\t
//
// That Init Duration only times the emulator's asynchronous Init call, not the
// bootstrap's start-up (that time ends up in the first invoke's Duration); the
// real figure is in the stderr line "INIT REPORT(durationMs: N)".
package testenv
