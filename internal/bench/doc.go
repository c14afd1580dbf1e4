// Package bench measures the callback against its stores; it has only
// test files besides this one, so that they can use internal/testkit/testenv.
//
//   - BenchmarkDynamoDB and BenchmarkSQLite: the full callback path
//     (httpapi.Handler with nonce.Off → core.Service → store) against the
//     bare store operation it is built on, in the same run: on DynamoDB
//     Local one TransactWriteItems of the same three items from the same
//     client; on SQLite BEGIN IMMEDIATE, the same three inserts, COMMIT on
//     the same database handle. Each reports the mean time of both sides
//     (raw-µs, full-µs), their ratio (full/raw) and, on DynamoDB, the
//     requests per callback (ddb-calls/callback).
//   - TestThroughput (only with BENCH_THROUGHPUT_OUT set): 1, 4, 16 and 64
//     concurrent clients sending new and repeated operations through the
//     full path for a bounded time per cell; writes operations, p50 and p99
//     latency per cell (results.Throughput, JSON) to the file the variable
//     names.
//   - TestInRegion (only with BENCH_INREGION_OUT set): a new operation (one
//     at a time and from 16 clients), a repeat, and the floors under them
//     (one bare GetItem, PutItem and TransactWriteItems of the store's own
//     items, and the Powertools pattern's three writes), and the
//     follow-ups (add_comment and close_ticket, new and repeated, without
//     and with a destination) through the
//     inregion proxy in front of DynamoDB Local, once adding no delay and
//     once adding the in-region latency model's; writes p50, p99,
//     operations per second, DynamoDB requests and capacity units per
//     operation and where the time went (results.InRegion, JSON) to the
//     file the variable names.
//   - TestColdStart (only with BENCH_COLDSTART_OUT set): builds the Lambda
//     bootstrap with and without SQLite, starts each cold under
//     aws-lambda-rie several times, and writes the sizes, every INIT REPORT
//     and the package initialisation (results.ColdStart, JSON) to the file
//     the variable names.
//
// `make bench` (the benchreport module at the repository root) runs all of
// them and writes docs/benchmarks.md.
package bench
